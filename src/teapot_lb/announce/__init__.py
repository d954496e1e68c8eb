"""Who announces what: pure functions of the cluster view (no I/O)."""
