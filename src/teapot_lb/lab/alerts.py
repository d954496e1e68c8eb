"""The alert rules in the lab: a real Prometheus scrapes every node while the scenarios
run; per mode and family the report lists the alerts that fired, the ones a failover must
fire are checked, and none may still fire once the lab is quiet again.

The lab runs the shipped rules (deploy/monitoring/teapot-lb.rules.yaml) on a faster
clock, since its failures last a second, not minutes: every ``for`` and every range is
divided by :data:`SCALE` (a minute of production becomes a second of lab), so a blip
shorter than the scaled ``for`` still fires nothing, and ``increase()`` forgets a lab's
restarts seconds later. Only the speaker's rules: standalone mode has no controller.
"""

from __future__ import annotations

import contextlib
import copy
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from teapot_lb.lab.network import LabNetwork
from teapot_lb.lab.prometheus import Prometheus
from teapot_lb.lab.report import ModeResult
from teapot_lb.lab.wait import LabTimeout, wait_for

RULES = Path(__file__).resolve().parents[3] / "deploy" / "monitoring" / "teapot-lb.rules.yaml"
SPEAKER_GROUP = "teapot-lb.speaker"
SCALE = 60.0  # lab seconds per production minute
METRICS_PORT = 7472
SCRAPE_INTERVAL = 0.5
QUIET_TIMEOUT = 60.0  # after the scenarios, alerts must stop firing within this
FIRE_TIMEOUT = 20.0  # a hard-killed node stays down at most this long for its alerts
# What a hard failure of a node must fire (for that node).
ON_HARD_KILL = ("TeapotLBSpeakerDown",)
SHOWN_LABELS = ("node", "peer", "service", "ip", "verdict")


def scaled(duration: str, scale: float = SCALE) -> str:
    """A Prometheus duration (``15m``, ``30s``) divided by ``scale``, in milliseconds."""
    match = re.fullmatch(r"(\d+)(ms|s|m|h|d)", duration)
    if match is None:
        raise ValueError(f"not a Prometheus duration: {duration!r}")
    unit = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    return f"{max(1, round(int(match.group(1)) * unit / scale * 1000))}ms"


def lab_rules(doc: Mapping[str, Any], scale: float = SCALE) -> dict[str, Any]:
    """The speaker's rules with every ``for`` and range divided by ``scale``."""
    groups = []
    for group in doc["groups"]:
        if group["name"] != SPEAKER_GROUP:
            continue
        group = copy.deepcopy(group)
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = scaled(rule["for"], scale)
            rule["expr"] = re.sub(
                r"\[(\d+(?:ms|s|m|h|d))\]",
                lambda m: f"[{scaled(m.group(1), scale)}]",
                rule["expr"],
            )
        groups.append(group)
    return {"groups": groups}


def describe(labels: Mapping[str, str]) -> str:
    """``TeapotLBSpeakerDown node=node-2``: the alert and the labels that say where."""
    where = " ".join(f"{k}={labels[k]}" for k in SHOWN_LABELS if k in labels)
    return f"{labels['alertname']} {where}".rstrip()


def fired(series: Iterable[Mapping[str, Any]]) -> list[str]:
    """The alerts of a query over ``ALERTS{alertstate="firing"}``, described, sorted."""
    return sorted({describe(s["metric"]) for s in series})


def expected(result: ModeResult) -> list[str]:
    """The alerts this mode's failover trials must have fired."""
    nodes = {t.node for f in result.failovers if f.kind == "hard" for t in f.trials}
    return sorted(f"{name} node={node}" for name in ON_HARD_KILL for node in nodes)


def missing(result: ModeResult, seen: Sequence[str]) -> list[str]:
    return [a for a in expected(result) if a not in seen]


class LabAlerts:
    """Prometheus in the lab's client namespace, scraping every node's ``teapot-lb run``
    (the network's ``metrics_port`` must be set before the speakers start)."""

    def __init__(self, net: LabNetwork, workdir: Path) -> None:
        self.net = net
        self.workdir = workdir
        self.prometheus = Prometheus(net.client, workdir, scrape_interval=SCRAPE_INTERVAL)

    def start(self) -> None:
        rules = self.workdir / "lab.rules.yaml"
        self.workdir.mkdir(parents=True, exist_ok=True)
        rules.write_text(yaml.safe_dump(lab_rules(yaml.safe_load(RULES.read_text()))))
        port = self.net.metrics_port
        targets = {f"{n.address}:{port}": n.name for n in self.net.nodes.values()}
        self.prometheus.start({"speaker": targets}, [rules])
        wait_for(
            lambda: (t := self.prometheus.targets()) and all(h == "up" for h in t.values()),
            timeout=30,
            what="Prometheus to scrape every node",
            every=0.2,
        )

    def since(self, start: float) -> list[str]:
        """The alerts that fired since ``start`` (a ``time.time()``)."""
        seconds = max(1, int(time.time() - start + 1))
        query = f'max_over_time(ALERTS{{alertstate="firing"}}[{seconds}s])'
        return fired(self.prometheus.query(query))

    def judge(self, result: ModeResult, start: float) -> None:
        """Record in ``result`` what fired during its scenarios; an expected alert that
        did not fire is an error of the mode."""
        result.alerts = self.since(start)
        for alert in missing(result, result.alerts):
            result.errors.append(f"alert {alert} did not fire")

    def firing(self) -> list[str]:
        return fired(self.prometheus.query('ALERTS{alertstate="firing"}'))

    def hold_until_fired(self, node: str, timeout: float = FIRE_TIMEOUT) -> None:
        """Before a hard-killed ``node`` comes back: wait (at most ``timeout``) until the
        alerts a hard kill must fire fire for it. A failover is faster than the scaled
        ``for`` of those alerts plus a scrape and an evaluation, so reviving the node as
        soon as the client is served again would make them fire or not by chance. If they
        do not fire in time, :meth:`judge` reports it."""
        wanted = {f"{name} node={node}" for name in ON_HARD_KILL}
        with contextlib.suppress(LabTimeout):
            wait_for(
                lambda: wanted <= set(self.firing()),
                timeout=timeout,
                what=f"{', '.join(sorted(wanted))} to fire",
                every=0.25,
            )

    def quiet(self) -> list[str]:
        """Wait until no alert fires (at most :data:`QUIET_TIMEOUT`); those still firing."""
        left: list[str] = []

        def calm() -> bool:
            left[:] = self.firing()
            return not left

        try:
            wait_for(calm, timeout=QUIET_TIMEOUT, what="every alert to stop firing", every=0.5)
        except AssertionError:
            return left
        return []
