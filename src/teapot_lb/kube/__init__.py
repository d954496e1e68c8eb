"""The Kubernetes adapter: the only package that imports ``kubernetes_asyncio``.

- :mod:`.client` — :func:`connect` and :class:`KubeClient` (verbs on any
  :class:`~.resources.Resource`, objects as JSON dicts, errors from :mod:`.errors`);
- :mod:`.informer` — list + watch cache with handlers that enqueue keys;
- :mod:`.workqueue` — deduplicating, rate-limited key queue for reconcilers;
- :mod:`.reconciler` — :class:`ReconcileLoop`: informers -> queue -> ``reconcile(key)``
  (the controller's one loop, keys typed per kind);
- :mod:`.status` — status subresource writes with retry on 409 Conflict;
- :mod:`.events` — Event recorder with aggregated counts;
- :mod:`.leader` — Lease-based leader election.
"""
