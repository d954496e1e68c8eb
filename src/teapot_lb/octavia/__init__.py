"""teapot-lb as an Octavia provider driver (`octavia.api.drivers: teapot`).

- :mod:`.tree` — an Octavia load balancer as the driver keeps it, and its edits;
- :mod:`.unsupported` — the options refused, each with its name and why;
- :mod:`.flavor` — the flavor metadata (`mode`: route or proxy);
- :mod:`.mapping` — tree → TenantLoadBalancer, manager's answer → Octavia statuses;
- :mod:`.management` — the management API side (Tenant of a project, write, wait);
- :mod:`.driver` — octavia-lib's `ProviderDriver`: its entry points, each an edit of the
  tree; :mod:`.driver_refusals` what a call refuses at once, :mod:`.driver_jobs` what runs
  after it returns, :mod:`.driver_runtime` what a process's drivers share (with
  :mod:`.agent`, the only modules importing octavia-lib).

Pure core in the first four; see docs/octavia.md.
"""
