"""The speaker's Prometheus metrics, read from the backends at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from teapot_lb.speaker.node import NodeSpeaker

PREFIX = "teapot_lb_speaker"


class SpeakerCollector(Collector):
    def __init__(self, speaker: NodeSpeaker) -> None:
        self.speaker = speaker

    def collect(self) -> Iterator[Metric]:
        s = self.speaker
        yield from self._plan(s)
        if s.bgp is not None:
            yield from self._bgp(s)
        if s.l2 is not None:
            yield from self._l2(s)
        if s.vip is not None:
            yield from self._vip(s)

    def _plan(self, s: NodeSpeaker) -> Iterator[Metric]:
        steps = CounterMetricFamily(f"{PREFIX}_plans", "Plans computed and applied.")
        steps.add_metric([], s.stats.steps)
        yield steps
        errors = CounterMetricFamily(f"{PREFIX}_plan_errors", "Steps that failed.")
        errors.add_metric([], s.stats.step_errors)
        yield errors
        last = GaugeMetricFamily(
            f"{PREFIX}_plan_duration_seconds",
            "Duration of the last plan computation (pure planning only).",
        )
        last.add_metric([], s.stats.plan_seconds[-1] if s.stats.plan_seconds else 0.0)
        yield last
        step = GaugeMetricFamily(
            f"{PREFIX}_step_duration_seconds", "Duration of the last plan + apply + report."
        )
        step.add_metric([], s.stats.last_step_s)
        yield step
        ann = GaugeMetricFamily(
            f"{PREFIX}_announced_ips", "Service IPs this node announces, per mode.", labels=["mode"]
        )
        counts: dict[str, int] = {}
        if s.last is not None:
            for items in s.last.announcing.values():
                for a in items:
                    counts[a.mode.value] = counts.get(a.mode.value, 0) + 1
        for mode in ("bgp", "l2", "vip"):
            ann.add_metric([mode], counts.get(mode, 0))
        yield ann

    def _bgp(self, s: NodeSpeaker) -> Iterator[Metric]:
        assert s.bgp is not None
        up = GaugeMetricFamily(
            f"{PREFIX}_bgp_session_up", "1 when the session is Established.", labels=["peer"]
        )
        state = GaugeMetricFamily(
            f"{PREFIX}_bgp_session_state",
            "1 for the session's current state.",
            labels=["peer", "state"],
        )
        sent = GaugeMetricFamily(
            f"{PREFIX}_bgp_prefixes_advertised", "Prefixes advertised to the peer.", labels=["peer"]
        )
        wanted = GaugeMetricFamily(
            f"{PREFIX}_bgp_prefixes_desired",
            "Prefixes the plan announces to the peer.",
            labels=["peer"],
        )
        speaker = s.bgp.speaker
        for name in sorted(s.bgp.setups):
            address = s.bgp.address_of(name)
            peer = speaker.peers.get(address) if speaker is not None and address else None
            wanted.add_metric([name], len(s.bgp.routes.get(name, {})))
            if peer is None:
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1 if peer.established else 0)
            state.add_metric([name, peer.state.value], 1)
            sent.add_metric([name], peer.prefixes_sent)
        yield from (up, state, sent, wanted)

    def _l2(self, s: NodeSpeaker) -> Iterator[Metric]:
        assert s.l2 is not None
        fields = {
            "requests_seen": ("arp_ndp_requests", "ARP requests / neighbor solicitations seen"),
            "replies_sent": ("arp_ndp_replies", "ARP replies / neighbor advertisements sent"),
            "gratuitous_sent": ("gratuitous_sent", "Gratuitous ARP / unsolicited NA sent"),
        }
        counters = s.l2.counters()
        for attr, (name, help_text) in fields.items():
            m = CounterMetricFamily(f"{PREFIX}_l2_{name}", help_text, labels=["interface"])
            for iface, values in sorted(counters.items()):
                m.add_metric([iface], values.get(attr, 0))
            yield m
        owned = GaugeMetricFamily(f"{PREFIX}_l2_owned_ips", "IPs this node answers for.")
        owned.add_metric([], len(s.l2.owned))
        yield owned
        beats = s.l2.membership.counters
        for name, value, help_text in (
            ("received", beats.received, "Heartbeats accepted from peers"),
            ("rejected", beats.rejected, "Heartbeats dropped (malformed, replayed, bad tag)"),
            (
                "unauthenticated",
                beats.unauthenticated,
                "Heartbeats dropped for a missing or wrong tag (forged, or another key)",
            ),
        ):
            m = CounterMetricFamily(f"{PREFIX}_l2_heartbeats_{name}", help_text)
            m.add_metric([], value)
            yield m
        live = GaugeMetricFamily(f"{PREFIX}_l2_live_speakers", "Speakers alive (membership).")
        live.add_metric([], len(s.l2.live_speakers()))
        yield live

    def _vip(self, s: NodeSpeaker) -> Iterator[Metric]:
        assert s.vip is not None
        state = GaugeMetricFamily(
            f"{PREFIX}_vrrp_state",
            "1 for the VRRP instance's current state.",
            labels=["instance", "state"],
        )
        for name, st in sorted(s.vip.supervisor.states.items()):
            state.add_metric([name, st.state.value], 1)
        yield state
        reloads = CounterMetricFamily(f"{PREFIX}_vrrp_reloads", "keepalived reloads.")
        reloads.add_metric([], s.vip.supervisor.counters.reloads)
        yield reloads


def speaker_registry(speaker: NodeSpeaker) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(SpeakerCollector(speaker))
    return registry
