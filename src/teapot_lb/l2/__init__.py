"""L2 announcement: answer ARP (IPv4) and NDP (IPv6) for the Service IPs this node owns.

``wire`` is the sans-I/O codec, ``announcer`` the pure decision of what to answer and
announce on one interface, ``claims`` the pure split-brain arbiter, ``responder`` the
``AF_PACKET`` adapter and ``agent`` a runnable speaker for a static set of IPs.
"""
