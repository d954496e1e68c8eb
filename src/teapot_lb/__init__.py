"""teapot-lb: load balancing for Kubernetes on bare metal."""

__version__ = "0.1.0.dev0"
