"""The relay's judging of one new route, against the number of tenants and routes held
(issue 35): in-process, no sockets, through the product's own functions.

For each size, a :class:`~teapot_lb.relay.rib.RelayRib` with TENANTS tenants (the same
Tenants as ``bench/relay.py`` makes, their policies made by
:func:`~teapot_lb.relay.policy.tenant_policy`), each tenant with NODES sessions already
holding HELD host routes each; then tenant 0's first node announces NEW routes it has not
sent, one UPDATE (one prefix) at a time, each through :meth:`RelayRib.learn` (keep as
received, judge, into the network's table) and each taken by the network side as the
relay's flush does (:meth:`RelayRib.take_changes` and the Adj-RIB-Out's
:meth:`~teapot_lb.bgp.rib.AdjRibOut.set_desired`). The per-route time is the median over
the NEW routes; a flat curve means the judging does not grow with what is held.

    .venv/bin/python bench/relay_judge.py --tenants 10,100,1000 --held 100

Last line JSON: rows of tenants, held, routes_held, learn_us_median, learn_us_p90,
flush_us_median.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Any

from teapot_lb.bgp.attributes import ReceivedPath
from teapot_lb.bgp.rib import AdjRibOut, encode_prefix
from teapot_lb.bgp.wire import IPV6_UNICAST, AsPath, Origin, OriginCode
from teapot_lb.bgp.wire.aspath import Segment, SegmentType
from teapot_lb.model.manifest import parse_object
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import Tenant
from teapot_lb.relay.policy import RelayOptions, protected_addresses, tenant_policy
from teapot_lb.relay.rib import RelayRib

sys.path.insert(0, str(Path(__file__).resolve().parent))

import relay as relay_bench  # a sibling script: the same Tenants as the relay bench


def received(t: int, n: int) -> ReceivedPath:
    """What tenant t's node n sends: its ASN, its own next hop."""
    segs = (Segment(SegmentType.AS_SEQUENCE, (relay_bench.asn(t),)),)
    return ReceivedPath(ip_address(relay_bench.node(t, n)), (Origin(OriginCode.IGP), AsPath(segs)))


def route(t: int, i: int) -> bytes:
    """Tenant t's i-th host route, in NLRI encoding."""
    return encode_prefix(ip_network(relay_bench.host_route(t, i)))


def one_size(tenants: int, held: int, nodes: int, new: int) -> dict[str, Any]:
    objs = [parse_object(d)[0] for d in relay_bench.manifests(tenants, nodes)]
    pools = {o.name: o for o in objs if isinstance(o, AddressPool)}
    options = RelayOptions(
        protected=protected_addresses(["2001:db8:ffff::1", "2001:db8:ffff::2"]),
        max_prefixes=held + new + 100,
    )
    policies = {o.name: tenant_policy(o, pools, options) for o in objs if isinstance(o, Tenant)}
    rib = RelayRib(options, policies)
    out = AdjRibOut()
    for t in range(tenants):
        for n in range(nodes):
            address = relay_bench.node(t, n)
            rib.open_session(address, f"t{t}")
            encs = [route(t, i) for i in range(1, held + 1)]
            rib.learn(address, IPV6_UNICAST, encs, received(t, n))
    out.set_desired(rib.compiled(), rib.take_changes())
    sender, path = relay_bench.node(0, 0), received(0, 0)
    fresh = [route(0, i) for i in range(held + 1, held + new + 1)]
    learn_ns: list[int] = []
    flush_ns: list[int] = []
    gc.collect()
    for enc in fresh:
        start = time.perf_counter_ns()
        rib.learn(sender, IPV6_UNICAST, [enc], path)
        mid = time.perf_counter_ns()
        out.set_desired(rib.compiled(), rib.take_changes())
        end = time.perf_counter_ns()
        learn_ns.append(mid - start)
        flush_ns.append(end - mid)
    accepted = rib.paths_of(ip_network(relay_bench.host_route(0, held + 1)))
    assert accepted, "the new route was not accepted"
    deciles = statistics.quantiles(learn_ns, n=10)
    return {
        "tenants": tenants,
        "held": held,
        "routes_held": tenants * held * nodes,
        "learn_us_median": round(statistics.median(learn_ns) / 1000, 2),
        "learn_us_p90": round(deciles[-1] / 1000, 2),
        "flush_us_median": round(statistics.median(flush_ns) / 1000, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tenants", default="10,100,1000", help="sizes, comma-separated")
    ap.add_argument("--held", type=int, default=100, help="routes each session holds")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--new", type=int, default=500, help="new routes timed, one at a time")
    args = ap.parse_args()
    assert args.held + args.new < 1024, "a tenant's allocation holds 1,024 addresses"
    rows = []
    for tenants in (int(t) for t in args.tenants.split(",")):
        row = one_size(tenants, args.held, args.nodes, args.new)
        rows.append(row)
        print(
            f"{tenants:5} tenants  {row['routes_held']:9,} paths held  learn median"
            f" {row['learn_us_median']:7.2f} µs  p90 {row['learn_us_p90']:7.2f} µs  flush"
            f" median {row['flush_us_median']:7.2f} µs"
        )
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
