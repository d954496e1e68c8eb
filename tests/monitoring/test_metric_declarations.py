"""Every component's metrics keep their names, types, labels, help and buckets: each
registry's declarations match metric_declarations.json (written from the code as it was
before the declarations moved to teapot_lb.metrics_table; UPDATE_METRICS=1 rewrites it
after a deliberate change)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from teapot_lb.cluster import Store
from teapot_lb.controller.metrics import ControllerMetrics
from teapot_lb.manager.metrics import ManagerMetrics
from teapot_lb.ovn.metrics import ovn_registry
from teapot_lb.ovn.nbdb import Connection
from teapot_lb.ovn.writer import NorthboundLoop, OVNWriter
from teapot_lb.relay.metrics import RelayMetrics

GOLDEN = Path(__file__).with_name("metric_declarations.json")


def declarations(registry: CollectorRegistry) -> list[dict[str, Any]]:
    """Name, type, help and label names of every metric of the registry (labelled ones
    from their declaration: they have no sample before a first `labels()`)."""
    out: list[dict[str, Any]] = []
    for collector in list(registry._collector_to_names):
        if isinstance(collector, MetricWrapperBase):
            entry = {
                "name": collector._name,
                "type": collector._type,
                "help": collector._documentation,
                "labels": list(collector._labelnames),
            }
            bounds = getattr(collector, "_upper_bounds", None)
            if bounds is not None:
                entry["buckets"] = [str(b) for b in bounds]
            out.append(entry)
            continue
        for family in collector.collect():
            labels = sorted({k for s in family.samples for k in s.labels})
            out.append(
                {"name": family.name, "type": family.type, "help": family.documentation,
                 "labels": labels}
            )  # fmt: skip
    return sorted(out, key=lambda e: e["name"])


def ovn() -> CollectorRegistry:
    loop = NorthboundLoop(Connection("unix:/nonexistent/ovnnb_db.sock"), "c1")
    return ovn_registry(OVNWriter(Store(), loop, "c1"))


COMPONENTS = {
    "controller": lambda: ControllerMetrics().registry,
    "manager": lambda: ManagerMetrics().registry,
    "relay": lambda: RelayMetrics().registry,
    "ovn": ovn,
}


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_a_components_metrics_keep_their_names_labels_and_help(component: str) -> None:
    now = declarations(COMPONENTS[component]())
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if os.environ.get("UPDATE_METRICS"):
        golden[component] = now
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    assert now == golden[component]
