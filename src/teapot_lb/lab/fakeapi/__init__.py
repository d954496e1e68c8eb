"""An in-repo fake Kubernetes API server for tests (real HTTP, real REST + watch protocol).

Run standalone (e.g. for benchmarks): ``python -m teapot_lb.lab.fakeapi --kubeconfig
/tmp/kc`` prints its URL and serves until interrupted. Its own tests, and the ``fake_api``
fixture the other tests use, are in ``tests/fakeapi/``.
"""

from .kinds import BUILTIN_KINDS, Kind, custom_kind
from .server import FakeApiServer, Faults, RequestRecord

__all__ = [
    "BUILTIN_KINDS",
    "FakeApiServer",
    "Faults",
    "Kind",
    "RequestRecord",
    "custom_kind",
]
