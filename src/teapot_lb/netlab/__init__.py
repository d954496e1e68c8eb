"""Network-namespace topologies for the lab and the tests.

Everything lives inside namespaces this module creates: switches are Linux
bridges inside their own namespace, hosts are namespaces joined to a switch by
a veth pair created directly between the two namespaces. Nothing is added to
the root namespace. Names carry the creating process's pid so parallel runs
never collide, and :func:`cleanup_stale` removes what a crashed run left.
"""

from teapot_lb.netlab.topology import Host, NetlabError, Topology, cleanup_stale, netns_available

__all__ = ["Host", "NetlabError", "Topology", "cleanup_stale", "netns_available"]
