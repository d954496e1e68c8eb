"""An Ingress's and a Gateway's own rules: Service backends, safe paths, TLS entries and
their Secrets (certificates of the object's own namespace), listeners' protocols and the
shared ports."""

from __future__ import annotations

from teapot_lb.model.gateway_api import Gateway, ListenerProtocol, TLSMode
from teapot_lb.model.ingress import Ingress
from teapot_lb.tenancy.l7cert import CERT_KEY, KEY_KEY
from teapot_lb.tenancy.l7vet.refusal import L7Refusal, L7Rule
from teapot_lb.tenancy.l7vet.values import unsafe_path
from teapot_lb.tenancy.l7vet.world import L7Object, L7World, Source, mirrored_name

# Ports shared by hostname: every tenant's HTTP on 80, HTTPS (terminated) and TLS
# passthrough both on 443 (the data plane reads the SNI: a passthrough route's names go
# through, the others are terminated). Any other (port, protocol) is the one tenant's,
# counted against its `quotas.ports`.
SHARED_PORTS = {ListenerProtocol.HTTP: 80, ListenerProtocol.HTTPS: 443, ListenerProtocol.TLS: 443}


def _secret_refusals(
    obj: L7Object, where: str, name: str, world: L7World, source: Source
) -> list[L7Refusal]:
    """A referenced Secret of the object's own namespace: its certificate, when known."""
    if world.secrets is None:
        return []
    key = f"{obj.metadata.namespace}/{mirrored_name(source.cluster, source.namespace, name)}"
    data = world.secrets.get(key)
    if data is None:
        return []  # not synced (yet): the reconcile reports it as an unresolved reference
    why = world.check_certificate(data.get(CERT_KEY, b""), data.get(KEY_KEY, b""))
    if why is None:
        return []
    return [L7Refusal(L7Rule.INVALID_CERTIFICATE, where, f"Secret {name}: {why}")]


def ingress_refusals(obj: Ingress, world: L7World, source: Source) -> list[L7Refusal]:
    out: list[L7Refusal] = []
    for where, backend in obj.backends():
        if backend.resource is not None:
            out.append(
                L7Refusal(
                    L7Rule.BACKEND_NOT_ALLOWED,
                    f"{where}.resource",
                    "only Service backends are served",
                )
            )
    for i, rule in enumerate(obj.spec.rules):
        for j, path in enumerate(rule.http.paths if rule.http else []):
            if path.path is not None:
                bad = unsafe_path(path.path, f"spec.rules[{i}].http.paths[{j}].path")
                out += [bad] if bad else []
    for i, tls in enumerate(obj.spec.tls):
        if not tls.secret_name:
            out.append(
                L7Refusal(
                    L7Rule.NOT_SERVED,
                    f"spec.tls[{i}].secretName",
                    "a TLS entry needs its Secret (the gateway has no default certificate "
                    "for tenants)",
                )
            )
            continue
        out += _secret_refusals(obj, f"spec.tls[{i}].secretName", tls.secret_name, world, source)
    return out


def listener_refusals(obj: Gateway, world: L7World, source: Source) -> list[L7Refusal]:
    out: list[L7Refusal] = []
    for i, listener in enumerate(obj.spec.listeners):
        where = f"spec.listeners[{i}]"
        protocols = [p.value for p in ListenerProtocol]
        if listener.protocol not in protocols:
            out.append(
                L7Refusal(
                    L7Rule.NOT_SERVED,
                    f"{where}.protocol",
                    f"protocol {listener.protocol} is not served ({', '.join(protocols)})",
                )
            )
            continue
        protocol = ListenerProtocol(listener.protocol)
        shared = SHARED_PORTS.get(protocol)
        if shared is not None and listener.port != shared:
            out.append(
                L7Refusal(
                    L7Rule.PORT_NOT_ALLOWED,
                    f"{where}.port",
                    f"{protocol.value} is served on the shared port {shared}, not {listener.port}",
                )
            )
        tls = listener.tls
        if protocol is ListenerProtocol.HTTPS and (tls is None or tls.mode is TLSMode.PASSTHROUGH):
            out.append(
                L7Refusal(
                    L7Rule.NOT_SERVED,
                    f"{where}.tls",
                    "HTTPS terminates TLS: it needs tls.mode Terminate and a certificate",
                )
            )
        if protocol is ListenerProtocol.TLS and (tls is None or tls.mode is TLSMode.TERMINATE):
            out.append(
                L7Refusal(
                    L7Rule.NOT_SERVED,
                    f"{where}.tls.mode",
                    "TLS listeners pass TLS through by SNI (tls.mode Passthrough)",
                )
            )
        for j, ref in enumerate(tls.certificate_refs if tls else []):
            ref_where = f"{where}.tls.certificateRefs[{j}]"
            if ref.group or ref.kind != "Secret":
                out.append(
                    L7Refusal(
                        L7Rule.SECRET_NOT_ALLOWED,
                        ref_where,
                        f"{ref.kind} {ref.name}: only Secrets hold certificates",
                    )
                )
            elif ref.namespace not in (None, source.namespace):
                out.append(
                    L7Refusal(
                        L7Rule.SECRET_NOT_ALLOWED,
                        f"{ref_where}.namespace",
                        f"Secret {ref.namespace}/{ref.name} is in another namespace; only "
                        f"Secrets of namespace {source.namespace} are served",
                    )
                )
            else:
                out += _secret_refusals(obj, ref_where, ref.name, world, source)
    return out
