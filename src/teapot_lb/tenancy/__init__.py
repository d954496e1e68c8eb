"""Teapot tenancy, the pure core: what a tenant may have, vetted, allocated and routed.

- :mod:`.vet` — is a request allowed for its tenant (typed refusals, one per rule);
- :mod:`.allocation` — the tenant's slice of the AddressPools, as IPAM pools;
- :mod:`.routes` — route mode's wanted routes: a function of a vetted request and its IPs;
- :mod:`.book` — the manager's decision for one request (status, Event, routes);
- :mod:`.request` — a tenant's Service as a `TenantLoadBalancer`;
- :mod:`.nodes`, :mod:`.node_status` — a tenant's registered nodes;
- :mod:`.programmed` — the programmed requests the speakers announce;
- :mod:`.l7vet`, :mod:`.l7address`, :mod:`.l7cert` — a tenant's Ingresses and Gateway API
  objects vetted (the webhook, `validate` and the gateway's control plane share them).

The processes around it live elsewhere: the manager in :mod:`teapot_lb.manager`, the tenant
agent in :mod:`teapot_lb.tenant_agent`, the gateway's control plane in
:mod:`teapot_lb.gateway.control`, the speakers' next-hop checks in
:mod:`teapot_lb.announce.hop_health` and :mod:`teapot_lb.speaker.hop_prober`, standalone
Teapot in :mod:`teapot_lb.standalone.teapot`.
"""
