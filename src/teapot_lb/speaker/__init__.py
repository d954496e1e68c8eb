"""The speaker: what this node announces, applied to BGP, L2 and VIP backends.

- :mod:`.backend` — :class:`Backend`, the one protocol every backend follows (mode,
  `plan_options`, `apply_plan(step)`, `failure(decision)`, `withdraw`), and :class:`Step`;
- :mod:`.wiring` — :data:`BACKENDS` (mode name → the module's `build`, one line per
  backend) and :func:`build_speaker`;
- :mod:`.desired` (pure) — a plan's announcements shaped per backend, and diffs;
- :mod:`.report` (pure) — per-Service summaries (`bgp 203.0.113.1 to router`) and the
  `NodeAnnouncing` / `AnnounceFailed` Events between two steps;
- :mod:`.bgp_backend` — one :class:`teapot_lb.bgp.Speaker`, a peer per BGPPeer selecting
  the node (`peer_setups`, pure), per-peer routes set only when they change;
- :mod:`.l2_backend` — membership heartbeats among speakers (→ `live_speakers` for the
  plan), ARP/NDP responders for the claimed IPs, the split-brain arbiter;
- :mod:`.vip_backend` — cluster-wide VIP groups → keepalived.conf → supervisor, Local
  Services by track file;
- :mod:`.node` — :class:`NodeSpeaker`: Store → `plan(view, node)` → each backend in its
  list, debounced, level-triggered; `shutdown()` lets each withdraw, in order;
- :mod:`.interfaces` — this node's interfaces (netlink) and the default placement of an IP;
- :mod:`.run_marker` — :class:`RunMarker`: whether this start follows a crash (BGP
  graceful restart);
- :mod:`.metrics` — Prometheus collector reading the backends at scrape time;
- :mod:`.kube_source` — informers → Store;
- :mod:`.kube_reporter` — what the speaker writes to Kubernetes (per-node annotation
  `announce.lb.teapot.io/<node>`, Events).

Standalone mode (:mod:`teapot_lb.standalone`) feeds the same :class:`NodeSpeaker` from a
manifest directory.
"""
