"""A TERMINATED_HTTPS listener's certificates against its Tenant: refused by option,
reference and name when outside the Tenant's DNS domains or not servable."""

from __future__ import annotations

from pathlib import Path

from gateway.control.builders import tenant
from gateway.lab import make_certificate
from needs import require_binary
from teapot_lb.octavia.tls import certificate_names, certificate_refusals


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
