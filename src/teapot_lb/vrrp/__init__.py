"""VIP mode: keepalived (VRRPv3) instances elect the node that holds each Service IP.

``render`` (pure) turns the cluster's VIP groups into one node's keepalived.conf;
``notify`` (pure) parses keepalived's notify FIFO; ``supervisor`` (asyncio) runs
keepalived, reloads it when the rendered text changes and reports mastership. The
speaker's VIP backend (:mod:`teapot_lb.speaker.vip_backend`) drives them.
"""
