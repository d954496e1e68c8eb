"""A discrete-event simulator for the sans-I/O cores: a virtual clock, a network model
(latency, jitter, loss, partitions, one-way cuts) and a cluster of N membership cores in
one process (:mod:`teapot_lb.sim.liveness`), for tests and ``bench/scale.py``."""
