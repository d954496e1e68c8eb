"""OVN mode: teapot-lb's Service IPs as OVN Northbound ``Load_Balancer`` rows.

Pure core: :mod:`~teapot_lb.ovn.rows` (the rows we own, as data),
:mod:`~teapot_lb.ovn.desired` (what the cluster view wants), :mod:`~teapot_lb.ovn.diff`
(the operations between two states). Adapter: :mod:`~teapot_lb.ovn.nbdb` (the OVSDB
connection, through the ``ovs`` IDL) and :mod:`~teapot_lb.ovn.writer` (the level-triggered
reconcile loop, one per cluster). With BGP: :mod:`~teapot_lb.ovn.gateways` (pure: which
nodes hold the gateway ports) and :mod:`~teapot_lb.ovn.sbdb` (the Southbound watch the
speakers run with ``--ovn-sb``). See docs/ovn.md.
"""
