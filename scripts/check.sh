#!/usr/bin/env bash
# The whole quality gate: lint, format, types, generated-file drift, tests.
# Run after scripts/setup.sh (it uses .venv). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

step "ruff check"
ruff check src tests bench
step "ruff format --check"
ruff format --check src tests bench
step "mypy --strict src"
mypy --strict src
if [ -x scripts/gen-crds.sh ]; then
  step "CRDs match the models"
  scripts/gen-crds.sh --check
fi
step "pytest"
# The image test (tests/image) builds the container image when none is there: a few
# minutes of mmdebstrap, but the gate runs every test. TEAPOT_BUILD_IMAGE=0 skips it.
export TEAPOT_BUILD_IMAGE="${TEAPOT_BUILD_IMAGE:-1}"
rc=0
python -m pytest -q -ra -p no:cacheprovider --durations=30 "$@" || rc=$?
# Exit 5 (no tests collected) must fail the gate, not pass it.
exit "$rc"
