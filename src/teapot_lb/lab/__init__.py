"""`teapot-lb lab`: a small data centre in network namespaces, teapot-lb in it, measured.

| module | what |
|---|---|
| `manifests` | the lab's shape from a manifest directory; the Services it writes (pure-ish) |
| `network` | namespaces, router, nodes (`teapot-lb run` + HTTP workload), kube-proxy emulation |
| `router` | BIRD / FRR configs (pure) and daemons; the kernel FIB's ECMP next hops |
| `client` | HTTP requests and 10 ms probes from inside the client namespace |
| `measure` | percentiles, outages, spreads from probe attempts (pure) |
| `scenarios` | one mode: create, reach, spread, fail over, delete |
| `report` | typed results, the report table and the JSON document (pure) |
| `runner` | the whole run with cleanup on every exit path |
| `serve` | the HTTP server that answers with its node's name |

See docs/lab.md.
"""
