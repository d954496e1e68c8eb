"""Teapot tenancy: tenants' load-balancer requests vetted, allocated and routed (pure core),
and the `manager` and `tenant-agent` adapters around it.

- :mod:`.vet` — is a request allowed for its tenant (typed refusals, one per rule);
- :mod:`.allocation` — the tenant's slice of the AddressPools, as IPAM pools;
- :mod:`.routes` — route mode's wanted routes: a function of a vetted request and its IPs;
- :mod:`.book` — the manager's decision for one request (status, Event, routes);
- :mod:`.hop_health` — the speakers' own liveness check of tenant next hops (sans I/O),
  :mod:`.hop_prober` its I/O;
- :mod:`.kube_manager`, :mod:`.kube_agent` — the Kubernetes adapters.
"""
