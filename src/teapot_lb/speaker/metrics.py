"""The speaker's Prometheus metrics, read from the backends at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from teapot_lb.speaker.hop_prober import TenantHopProber
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
        prober = s.backend(TenantHopProber)
        if prober is not None:
            yield from self._tenant_hops(prober)

    def _tenant_hops(self, prober: TenantHopProber) -> Iterator[Metric]:
        hops = GaugeMetricFamily(
            f"{PREFIX}_tenant_next_hops",
            "Route mode: tenant next hops this speaker probes, and those failing (withheld "
            "while another hop of their route answers).",
            labels=["state"],
        )
        hops.add_metric(["probed"], len(prober.health.targets))
        hops.add_metric(["failing"], len(prober.health.verdict.failing))
        yield hops

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
        yield self._service_ips(s)

    def _service_ips(self, s: NodeSpeaker) -> Metric:
        """Per Service IP of the view: 1 when this node announces it (by any mode, no
        failure). The max over nodes is 0 for an IP nobody announces (an alert)."""
        m = GaugeMetricFamily(
            f"{PREFIX}_service_ip_announced",
            "1 when this node announces the Service IP (by any mode, without failure).",
            labels=["service", "ip"],
        )
        last = s.last
        if last is None:
            return m
        announced: dict[tuple[str, str], bool] = {}
        for d in last.plan.decisions:
            ok = d.announces and d.ip not in last.failures.get(d.service, {})
            key = (d.service, d.ip)
            announced[key] = announced.get(key, False) or ok
        for (service, ip), ok in sorted(announced.items()):
            m.add_metric([service, ip], 1 if ok else 0)
        return m

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
        established = CounterMetricFamily(
            f"{PREFIX}_bgp_sessions_established",
            "Times the session reached Established (more than once: it flapped).",
            labels=["peer"],
        )
        rejected = CounterMetricFamily(
            f"{PREFIX}_bgp_prefixes_rejected",
            "Prefixes from the peer that the import filter rejected.",
            labels=["peer"],
        )
        notifications = CounterMetricFamily(
            f"{PREFIX}_bgp_notifications_received",
            "NOTIFICATIONs the peer sent (it closed the session with an error).",
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
            established.add_metric([name], peer.counters.established)
            rejected.add_metric([name], peer.counters.prefixes_rejected)
            notifications.add_metric([name], peer.counters.notifications_received)
        yield from (up, state, sent, wanted, established, rejected, notifications)

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
        claims = CounterMetricFamily(
            f"{PREFIX}_l2_claims",
            "Claims by another station on an IP this node owns, by verdict (defend: this "
            "node outranks the claimant and re-announced; yield: it stopped answering).",
            labels=["verdict"],
        )
        for verdict in ("defend", "yield"):
            claims.add_metric([verdict], s.l2.claims_judged.get(verdict, 0))
        yield claims

    def _vip(self, s: NodeSpeaker) -> Iterator[Metric]:
        assert s.vip is not None
        state = GaugeMetricFamily(
            f"{PREFIX}_vrrp_state",
            "1 for the VRRP instance's current state.",
            labels=["vrrp_instance", "state"],
        )
        for name, st in sorted(s.vip.supervisor.states.items()):
            state.add_metric([name, st.state.value], 1)
        yield state
        counters = s.vip.supervisor.counters
        reloads = CounterMetricFamily(f"{PREFIX}_vrrp_reloads", "keepalived reloads.")
        reloads.add_metric([], counters.reloads)
        yield reloads
        for name, value, help_text in (
            ("keepalived_starts", counters.starts, "keepalived starts (the first included)"),
            (
                "keepalived_unexpected_exits",
                counters.unexpected_exits,
                "keepalived deaths the supervisor did not ask for (then restarted)",
            ),
            (
                "vrrp_dual_master_resolutions",
                counters.dual_master_resolutions,
                "Adverts of another master with a lower priority seen while master",
            ),
        ):
            m = CounterMetricFamily(f"{PREFIX}_{name}", help_text)
            m.add_metric([], value)
            yield m
        master = GaugeMetricFamily(
            f"{PREFIX}_vip_master",
            "1 for each VIP this node holds as VRRP master (more than one node: a collision).",
            labels=["ip"],
        )
        for ip in sorted(s.vip.masters()):
            master.add_metric([ip], 1)
        yield master


def speaker_registry(speaker: NodeSpeaker) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(SpeakerCollector(speaker))
    return registry
