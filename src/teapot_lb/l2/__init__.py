"""L2 announcement: answer ARP (IPv4) and NDP (IPv6) for the Service IPs this node owns.

``wire`` is the sans-I/O codec, ``announcer`` the pure decision of what to answer and
announce on one interface, ``claims`` the pure split-brain arbiter, ``responder`` the
``AF_PACKET`` adapter. The speaker's L2 backend (:mod:`teapot_lb.speaker.l2_backend`)
drives them; :mod:`teapot_lb.lab.lan` is the namespace lab that tests them.
"""
