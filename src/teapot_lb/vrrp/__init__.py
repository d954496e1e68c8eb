"""VIP mode: keepalived (VRRPv3) instances elect the node that holds each Service IP.

``render`` (pure) turns the cluster's VIP groups into one node's keepalived.conf;
``notify`` (pure) parses keepalived's notify FIFO; ``supervisor`` (asyncio) runs
keepalived, reloads it when the rendered text changes and reports mastership;
``agent`` is a small standalone runner used by the tests and the benchmark.
"""
