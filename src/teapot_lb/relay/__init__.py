"""The Teapot BGP filtering relay (docs/relay.md): :mod:`.policy` (a tenant's import policy
from its Tenant, pure), :mod:`.rib` (Adj-RIB-In before policy, re-judging, the paths for
the network, pure), :mod:`.relay` (the two BGP speakers), :mod:`.standalone` and
:mod:`.kube` (where Tenants come from), :mod:`.metrics`."""
