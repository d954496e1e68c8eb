"""A TERMINATED_HTTPS listener's certificates against its Tenant: refused by option,
reference and name when outside the Tenant's DNS domains or not servable."""

from __future__ import annotations

from pathlib import Path

from gateway.control.builders import tenant
from needs import require_binary
from octavia.builders import LISTENER_ID, POOL_ID, load_balancer, member, pool
from octavia.test_l7 import HOST, NAMESPACE, policy, rule, through_gateway
from teapot_lb.lab.gateway_lab import make_certificate
from teapot_lb.model.manifest import parse_object
from teapot_lb.octavia import l7
from teapot_lb.octavia.l7 import section_of
from teapot_lb.octavia.tls import certificate_names, certificate_refusals, container_names
from teapot_lb.octavia.tree import Mode, load_balancer_from_provider, put_listener


def container(directory: Path, hostname: str) -> dict[str, str]:
    cert, key, _ = make_certificate(directory, hostname)
    return {"certificate": cert.read_text(), "private_key": key.read_text()}


def test_certificates_within_the_domains_pass_and_others_are_refused_by_name(
    tmp_path: Path,
) -> None:
    require_binary("openssl")
    acme = tenant("acme", dnsDomains=["acme.example"])
    www, bolt = container(tmp_path, "www.acme.example"), container(tmp_path, "www.bolt.example")
    assert certificate_names(www["certificate"].encode()) == ["www.acme.example"]
    listener = {
        "listener_id": "L1",
        "default_tls_container_ref": "ref-www",
        "default_tls_container_data": www,
        "sni_container_refs": ["ref-bolt"],
        "sni_container_data": [bolt],
    }
    [refused] = certificate_refusals(listener, acme)
    assert refused.startswith("listener L1: sni_container_refs ref-bolt: certificate name ")
    assert "www.bolt.example" in refused and "HostnameNotAllowed" in refused
    assert certificate_refusals({**listener, "sni_container_data": []}, acme) == []
    swapped = {**www, "private_key": bolt["private_key"]}
    [bad_key] = certificate_refusals({"listener_id": "L2", "default_tls_container_ref": "r",
                                      "default_tls_container_data": swapped}, acme)  # fmt: skip
    assert bad_key.startswith("listener L2: default_tls_container_ref r: ") and "key" in bad_key


def test_each_certificate_is_offered_for_the_hostnames_it_names(tmp_path: Path) -> None:
    """Two certificates, their names known: a Gateway listener each, and each hostname's
    route on the one whose certificate names it (else the default's); translated, the
    gateway offers each certificate for its own hostname only: a hostname no certificate
    covers gets none by SNI (HAProxy answers it with the listener's first, the default)."""
    require_binary("openssl")
    www, api = container(tmp_path, HOST), container(tmp_path, "api.acme.example")
    d = load_balancer(pools=[pool([member(0, port=8080)], protocol="HTTP", hm=False)])
    d["listeners"][0].update(
        protocol="TERMINATED_HTTPS", protocol_port=443,
        default_tls_container_ref="r0", default_tls_container_data=www,
        sni_container_refs=["r1"], sni_container_data=[api],
        l7policies=[policy(n, "REDIRECT_TO_POOL", [rule(n, "HOST_NAME", "EQUAL_TO", host)],
                           redirect_pool_id=POOL_ID)
                    for n, host in ((1, HOST), (2, "api.acme.example"), (3, "x.acme.example"))],
    )  # fmt: skip
    lb = load_balancer_from_provider(d, Mode.ROUTE)
    listener = lb.listeners[0]
    hosts = (container_names(www), container_names(api))
    lb = put_listener(lb, listener.model_copy(update={"certificate_hosts": hosts}))
    listener = lb.listeners[0]
    assert section_of(listener, "api.acme.example") == f"{LISTENER_ID}-sni1"
    assert section_of(listener, HOST) == section_of(listener, "x.acme.example") == LISTENER_ID
    bodies = [*l7.gateway_objects(lb, NAMESPACE),
              *l7.tls_secrets(lb, LISTENER_ID, [www, api], NAMESPACE)]  # fmt: skip
    # The SNI certificate's Gateway listener has its hostname: two hostname-less HTTPS
    # listeners on 443 are refused by the upstream Gateway CRD (and by parse_object).
    (gw,) = [b for b in bodies if b["kind"] == "Gateway"]
    assert [(e["name"], e.get("hostname")) for e in gw["spec"]["listeners"]] == [
        (LISTENER_ID, None), (f"{LISTENER_ID}-sni1", "api.acme.example")]  # fmt: skip
    assert parse_object(gw)[1] == []
    done = through_gateway(bodies, notes=True)
    offered = {c.cert_pem.strip(): set(c.hostnames) for c in done.config.certificates}
    assert offered == {
        www["certificate"].strip(): {HOST},
        api["certificate"].strip(): {"api.acme.example"},
    }
    notes = [n for r in done.results.values() for n in r.notes]
    assert any("covers none of x.acme.example" in n for n in notes), notes
