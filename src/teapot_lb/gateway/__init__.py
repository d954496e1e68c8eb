"""The Teapot gateway's data plane: what it serves (`config`), how HAProxy and nginx are
told (`render`, `nginx`), and the drivers that run them (`haproxy`, `runtime`).

Kubernetes stays outside: the control plane translates vetted objects into a
`config.GatewayConfig` (see docs/gateway.md).
"""
