"""What every teapot provider driver object shares in one Octavia process (Octavia makes
a driver object per API call): the `[teapot]` options, the loop thread, the management
client, the DriverLibrary and the VIP orphan sweeps (:mod:`.sweep`); the faults they raise
and the provider objects they read as dictionaries."""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from octavia_lib.api.drivers import driver_lib
from octavia_lib.api.drivers import exceptions as lib_exceptions
from oslo_config import cfg

from teapot_lb import log
from teapot_lb.kube.client import connect
from teapot_lb.kube.errors import KubeError
from teapot_lb.octavia import sweep
from teapot_lb.octavia.agent import enabled as agent_enabled
from teapot_lb.octavia.management import LoopThread, Management, ManagementError

_log = log.get("octavia")

OPTIONS = [
    cfg.StrOpt("kubeconfig", help="Kubeconfig of the management cluster (default: in-cluster)"),
    cfg.StrOpt("context", help="Kubeconfig context (default: the current one)"),
    cfg.FloatOpt("answer_timeout", default=10.0, min=0.1,
                 help="Seconds to wait for the teapot-lb manager's answer to a change"),
    cfg.FloatOpt("request_timeout", default=10.0, min=0.1,
                 help="Seconds for one request to the management API"),
    cfg.FloatOpt("vip_orphan_grace", default=300.0, min=0.1,
                 help="Seconds after which a VIP request whose load balancer Octavia does "
                      "not have is deleted (longer than any load balancer create call)"),
    cfg.FloatOpt("sweep_interval", default=60.0, min=0.0,
                 help="Seconds between two VIP orphan sweeps (run on a driver call; 0: never)"),
]  # fmt: skip
GROUP = "teapot"


class Runtime:
    """What every driver instance shares in one Octavia process (Octavia makes a driver
    object per API call): the loop thread, the management client, the DriverLibrary."""

    def __init__(self) -> None:
        conf = cfg.CONF
        conf.register_opts(OPTIONS, group=GROUP)
        options = getattr(conf, GROUP)
        self.loop = LoopThread()
        client = self.loop.run(
            connect(
                options.kubeconfig,
                context=options.context,
                user_agent="teapot-lb-octavia",
                request_timeout_s=options.request_timeout,
            ),
            timeout=options.request_timeout + 5,
        )
        self.management = Management(client, answer_within_s=options.answer_timeout)
        self.call_timeout = options.answer_timeout + options.request_timeout + 5
        self.agent = agent_enabled(conf)
        self.sweep_interval = options.sweep_interval
        self.orphan_grace = timedelta(seconds=options.vip_orphan_grace)
        self._creating: set[str] = set()  # load balancers in create_vip_port/loadbalancer_create
        self._next_sweep = 0.0
        agent = conf.driver_agent
        self.lib = driver_lib.DriverLibrary(
            status_socket=agent.status_socket_path,
            stats_socket=agent.stats_socket_path,
            get_socket=agent.get_socket_path,
        )

    def run(self, coro: Any) -> Any:
        """Run a management coroutine for a driver call; its failures become the
        DriverError Octavia shows the user."""
        try:
            return self.loop.run(coro, timeout=self.call_timeout)
        except KubeError as err:
            raise fault(f"the teapot-lb management API failed: {err}") from None
        except concurrent.futures.TimeoutError:
            raise fault(
                f"the teapot-lb management API did not answer within {self.call_timeout:g} s"
            ) from None

    @contextlib.contextmanager
    def creating(self, lb_id: str) -> Iterator[None]:
        """Mark a load balancer's create in flight in this process (the sweep spares it)."""
        with _RUNTIME_LOCK:
            self._creating.add(lb_id)
        try:
            yield
        finally:
            with _RUNTIME_LOCK:
                self._creating.discard(lb_id)

    def maybe_sweep(self) -> None:
        """Start a VIP orphan sweep (octavia/sweep.py) when one is due; never blocks."""
        now = time.monotonic()
        with _RUNTIME_LOCK:
            if not self.sweep_interval or now < self._next_sweep:
                return
            self._next_sweep = now + self.sweep_interval
            in_flight = frozenset(self._creating)

        async def run() -> None:
            try:
                await sweep.sweep(
                    self.management,
                    partial(sweep.asked, self.lib.get_loadbalancer),
                    now=datetime.now(UTC),
                    grace=self.orphan_grace,
                    in_flight=in_flight,
                )
            except (KubeError, ManagementError) as err:  # the next call's sweep tries again
                _log.warning("sweep failed", error=str(err))

        self.loop.submit("sweep", run)


_RUNTIME: Runtime | None = None
_RUNTIME_LOCK = threading.Lock()


def runtime() -> Runtime:
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None:
            _RUNTIME = Runtime()
        return _RUNTIME


def fault(message: str) -> lib_exceptions.DriverError:
    return lib_exceptions.DriverError(user_fault_string=message, operator_fault_string=message)


def provider_dict(obj: Any) -> dict[str, Any]:
    """A provider object (or dictionary) as a dictionary of the attributes it sets."""
    if isinstance(obj, Mapping):
        return dict(obj)
    result: dict[str, Any] = obj.to_dict(recurse=True, render_unsets=False)
    return result
