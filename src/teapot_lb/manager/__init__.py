"""The Teapot manager's Kubernetes adapter (:mod:`.kube`: the book driven by informers,
leader only) and its metrics (:mod:`.metrics`); the decisions are :mod:`teapot_lb.tenancy`'s."""
