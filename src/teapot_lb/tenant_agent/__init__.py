"""The Teapot tenant agent's Kubernetes adapters: :mod:`.kube` (a tenant's Services as
requests, their addresses back) and :mod:`.kube_nodes` (the cluster's Nodes as one
TenantNodes); the decisions are :mod:`teapot_lb.tenancy`'s."""
