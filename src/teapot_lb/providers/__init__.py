"""Who builds a tenant's load balancer: a provider per kind of load balancer.

A TenantLoadBalancer the manager has vetted and given addresses is served by one provider:
route mode (the management speakers), proxy mode (the shared gateway), or an external load
balancer (Octavia, a hardware appliance). :mod:`.base` is the contract every provider
keeps; each provider is one module, registered in one table.
"""
