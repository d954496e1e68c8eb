"""The validating webhook called by a real kube-apiserver: the chart's
ValidatingWebhookConfiguration, registered by URL (no Pod backs its Service here) with the
caBundle that signed the controller's serving certificate. A rejection reaches kubectl
with the object, the field and the reason."""

from __future__ import annotations

import base64
import json
from typing import Any

from model.builders import bgp_advertisement, pool
from teapot_lb.lab.kubeplane import free_port
from teapot_lb.webhook import VALIDATE_PATH

from .release import Release, wait_until
from .test_controller import pools


def register_by_url(release: Release, port: int) -> str:
    """The rendered configuration, pointed at ``127.0.0.1:port`` and scoped to the release's
    namespace (the tier's other tests share the apiserver). Returns its name."""
    (config,) = [o for o in release.objects if o["kind"] == "ValidatingWebhookConfiguration"]
    config = json.loads(json.dumps(config))
    config["metadata"]["name"] = f"teapot-lb-{release.namespace}"
    ca = base64.b64encode(release.plane.pki.ca_cert.read_bytes()).decode()
    for hook in config["webhooks"]:
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{VALIDATE_PATH}", "caBundle": ca}
        hook["namespaceSelector"] = {
            "matchLabels": {"kubernetes.io/metadata.name": release.namespace}
        }
    release.apply(config)
    return str(config["metadata"]["name"])


def test_kubectl_shows_the_webhooks_rejection_with_object_field_and_reason(
    release: Release,
) -> None:
    cert, key = release.plane.pki.issue("teapot-lb-webhook", san="IP:127.0.0.1")
    port = free_port()
    ctl = release.controller("alpha", webhook=(cert, key, port))
    name = register_by_url(release, port)
    try:
        good = pools(release, pool("blue", "192.0.2.0/28"))
        # The webhook answers once the controller has synced its cache; until then the
        # apiserver (failurePolicy Fail) refuses the write.
        wait_until(
            lambda: release.apply(*good, check=False).returncode == 0,
            "the webhook admits a valid pool",
            daemons=[ctl],
        )
        bad: dict[str, Any] = pools(release, pool("typo", "192.0.2.300/32"))[0]
        done = release.apply(bad, check=False)
        assert done.returncode != 0
        stderr = done.stderr
        assert 'admission webhook "validate.lb.teapot.io" denied the request' in stderr, stderr
        assert "AddressPool" in stderr and "typo" in stderr, stderr
        assert "spec.addresses[0]" in stderr and "192.0.2.300" in stderr, stderr
        assert release.kubectl("get", "addresspool", "typo", "-n", release.namespace).returncode
        # A change that breaks the whole configuration: an advertisement of a missing pool.
        orphan = pools(release, bgp_advertisement("adv", "nope"))[0]
        refused = release.apply(orphan, check=False)
        assert refused.returncode != 0 and "adv" in refused.stderr, refused.stderr
        assert "nope" in refused.stderr, refused.stderr
    finally:
        release.plane.kubectl("delete", "validatingwebhookconfiguration", name)
    assert not release.denied("controller")
