"""`teapot-lb status`: one screen for a cluster or a standalone directory (pure core).

:mod:`.reports` turns what each node's speaker says (a standalone ``status.json``, or in a
cluster its annotations and ``/metrics``) into one :class:`NodeReport` shape;
:mod:`.summary` combines the view with those reports into a :class:`ClusterStatus`
(pools and usage, BGP sessions, who holds each Service IP, problems); :mod:`.render`
prints it as a table or JSON. The reading (files, API, HTTP) is in ``cli/status.py``.
"""

from teapot_lb.status.reports import NodeReport, report_from_metrics, report_from_status
from teapot_lb.status.summary import (
    ClusterStatus,
    Holder,
    PoolUsage,
    SessionState,
    summarize,
)

__all__ = [
    "ClusterStatus",
    "Holder",
    "NodeReport",
    "PoolUsage",
    "SessionState",
    "report_from_metrics",
    "report_from_status",
    "summarize",
]
