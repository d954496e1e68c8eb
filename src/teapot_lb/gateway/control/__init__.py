"""The Teapot gateway's control plane: tenants' objects mirrored (:mod:`.l7mirror`, pure;
:mod:`.kube_l7mirror`, in the tenant agent), their addresses' Services (:mod:`.l7services`),
translated and written back (:mod:`.l7status`, :mod:`.kube_l7gateway`), or read from a
manifest directory (:mod:`.l7standalone`). The vetting is :mod:`teapot_lb.tenancy.l7vet`'s;
the data plane is :mod:`teapot_lb.gateway`'s."""
