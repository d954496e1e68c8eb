"""BFD, Bidirectional Forwarding Detection (RFC 5880 asynchronous mode), sans I/O.

``wire`` is the control-packet codec, ``session`` the state machine of one session,
``transport`` the asyncio adapter (UDP per RFC 5881 single-hop and RFC 5883 multihop).
"""
