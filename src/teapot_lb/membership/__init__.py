"""Fast liveness among speakers: a sans-I/O heartbeat core and its UDP transport."""
