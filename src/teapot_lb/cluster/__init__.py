"""What a component knows of the cluster: a cache of typed objects and immutable views of it.

Both adapters fill the same :class:`Store` — the Kubernetes informers
(`teapot_lb.kube`) and the manifest directory of standalone mode — and the pure
core (controller reconcile, announcement planning, explain) reads only
:class:`ClusterView` snapshots of it. That is what lets the very same reconcile
and plan code run against a real cluster and against a directory of YAML.
"""

from teapot_lb.cluster.store import Store
from teapot_lb.cluster.view import ClusterView, Kind, UnknownBFDProfile, object_key

__all__ = ["ClusterView", "Kind", "Store", "UnknownBFDProfile", "object_key"]
