"""Octavia's L7 listeners → the Teapot gateway's objects (pure).

An HTTP or TERMINATED_HTTPS listener, its L7 policies and rules, and the pools they send
to become objects in the project's Tenant namespace, written the way a tenant agent
mirrors a tenant's own (source cluster ``octavia``, source namespace the project id), so
the gateway's control plane vets and translates them like any tenant's:

- the load balancer's L7 listeners → one Gateway of class ``teapot``, a listener each
  (HTTP on 80, HTTPS on 443 with the listener's certificates as TLS Secrets);
- per listener and hostname → one HTTPRoute: the enabled policies in Octavia's position
  order, one rule each, then the listener's default pool as the last rule (a route's
  rules keep their order where the gateway's precedence ties, so the default pool only
  takes what no policy matched);
- each pool a route sends to → EndpointSlices labelled as the agent's mirror labels a
  Service's (``multicluster.kubernetes.io/service-name: pool-<id>``), the members at
  their port.

The shared gateway routes by hostname, so a listener serves the hostnames its policies'
``HOST_NAME EQUAL_TO`` rules name; a policy without a hostname rule applies to each of
them. What cannot be expressed is refused with the option's name
(:func:`l7_refusals`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from teapot_lb.gateway.control.l7mirror import (
    AGENT,
    ANNOTATION_SERVICE_PORTS,
    LABEL_BACKENDS,
    MANAGED_BY,
    MCS_SERVICE_NAME,
    MCS_SOURCE_CLUSTER,
)
from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.gateway_api import GATEWAY_API_VERSION, ListenerProtocol
from teapot_lb.model.manifest import parse_object
from teapot_lb.model.tenancy import GatewayBackends, Tenant
from teapot_lb.octavia.monitor import health_annotations
from teapot_lb.octavia.tree import L7Policy, L7Rule, Listener, LoadBalancer, Pool
from teapot_lb.octavia.unsupported import ObjectKind, Unsupported
from teapot_lb.tenancy.l7cert import CERT_KEY, KEY_KEY, covered_hostnames
from teapot_lb.tenancy.l7vet import (
    GATEWAY_CLASS,
    LABEL_SOURCE_NAME,
    LABEL_SOURCE_NAMESPACE,
    SHARED_PORTS,
    L7Object,
    L7World,
    mirrored_name,
    vet_object,
)
from teapot_lb.tenancy.request import LABEL_CLUSTER

SOURCE_CLUSTER = "octavia"
"""The source cluster of everything the driver writes (as a tenant agent's cluster name)."""
LABEL_LOADBALANCER = "octavia.lb.teapot.io/loadbalancer"
"""On a TenantLoadBalancer and every gateway object: the Octavia load balancer (id)."""

L7_PROTOCOLS = frozenset({"HTTP", "TERMINATED_HTTPS"})
GATEWAY_PROTOCOLS = {"HTTP": ListenerProtocol.HTTP, "TERMINATED_HTTPS": ListenerProtocol.HTTPS}
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})


def is_l7(listener: Listener) -> bool:
    return listener.protocol in L7_PROTOCOLS


# ------------------------------------------------------------------ what is refused


def _rule_refusal(rule: L7Rule) -> Unsupported | None:
    def no(option: str, value: object, why: str) -> Unsupported:
        return Unsupported(ObjectKind.L7RULE, rule.id, option, value, why)

    if rule.invert:
        return no("invert", True, "the gateway's matches cannot be negated")
    if rule.type == "HOST_NAME" and rule.compare_type != "EQUAL_TO":
        return no("compare_type", rule.compare_type,
                  "HOST_NAME rules name one hostname (EQUAL_TO): the shared gateway routes "
                  "by exact hostname")  # fmt: skip
    if rule.type == "PATH" and rule.compare_type not in ("STARTS_WITH", "EQUAL_TO"):
        return no("compare_type", rule.compare_type,
                  "PATH rules are STARTS_WITH (a path prefix) or EQUAL_TO (an exact path); "
                  "the gateway does not serve regular expressions")  # fmt: skip
    if rule.type == "HEADER" and rule.compare_type != "EQUAL_TO":
        return no("compare_type", rule.compare_type, "HEADER rules match a value exactly")
    if rule.type not in ("HOST_NAME", "PATH", "HEADER"):
        return no("type", rule.type,
                  "the gateway matches HOST_NAME, PATH and HEADER only (no COOKIE, FILE_TYPE "
                  "or client certificate rules)")  # fmt: skip
    return None


def _url_refusal(policy: L7Policy, option: str, url: str, *, prefix: bool) -> Unsupported | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return Unsupported(ObjectKind.L7POLICY, policy.id, option, url,
                           "an http or https URL with a hostname")  # fmt: skip
    if parts.query or parts.fragment or parts.username:
        return Unsupported(ObjectKind.L7POLICY, policy.id, option, url,
                           "the gateway redirects without a query, fragment or user")  # fmt: skip
    if prefix and parts.path not in ("", "/"):
        return Unsupported(ObjectKind.L7POLICY, policy.id, option, url,
                           "a prefix with a path is not served: the gateway keeps the request's "
                           "path and changes scheme, host and port only")  # fmt: skip
    return None


def _policy_refusals(policy: L7Policy) -> list[Unsupported]:
    out: list[Unsupported] = []
    if policy.action == "REJECT":
        out.append(Unsupported(ObjectKind.L7POLICY, policy.id, "action", policy.action,
                               "the gateway has no deny action (a rule without backends "
                               "answers 500, not 403)"))  # fmt: skip
    elif policy.action == "REDIRECT_TO_URL":
        found = _url_refusal(policy, "redirect_url", policy.redirect_url or "", prefix=False)
        out += [found] if found else []
    elif policy.action == "REDIRECT_PREFIX":
        found = _url_refusal(policy, "redirect_prefix", policy.redirect_prefix or "", prefix=True)
        out += [found] if found else []
    elif policy.action != "REDIRECT_TO_POOL":
        out.append(Unsupported(ObjectKind.L7POLICY, policy.id, "action", policy.action,
                               "REDIRECT_TO_POOL, REDIRECT_TO_URL or REDIRECT_PREFIX"))  # fmt: skip
    code = policy.redirect_http_code
    redirects = policy.action in ("REDIRECT_TO_URL", "REDIRECT_PREFIX")
    if redirects and code is not None and code not in REDIRECT_CODES:
        out.append(Unsupported(ObjectKind.L7POLICY, policy.id, "redirect_http_code", code,
                               "301, 302, 303, 307 or 308"))  # fmt: skip
    paths = [r for r in policy.rules if r.admin_state_up and r.type == "PATH"]
    if len(paths) > 1:
        out.append(Unsupported(ObjectKind.L7POLICY, policy.id, "rules", len(paths),
                               "one PATH rule per policy"))  # fmt: skip
    hosts = sorted(_hosts_of(policy))
    if len(hosts) > 1:
        # Octavia ANDs a policy's rules: a request names one host, so two never match.
        # Served as written it would be a policy that never applies (and a hostname
        # nothing vets): give each hostname its own policy.
        out.append(Unsupported(ObjectKind.L7POLICY, policy.id, "rules", ", ".join(hosts),
                               "one hostname per policy (its HOST_NAME rules are ANDed, so "
                               "two names never match together): give each hostname its own "
                               "policy"))  # fmt: skip
    for rule in policy.rules:
        found_rule = _rule_refusal(rule)
        out += [found_rule] if found_rule else []
    return out


def l7_refusals(lb: LoadBalancer) -> list[Unsupported]:
    """What the load balancer's L7 listeners ask that the gateway cannot serve."""
    out: list[Unsupported] = []
    for listener in lb.listeners:
        if not is_l7(listener):
            for policy in listener.l7policies:
                out += _policy_refusals(policy)
                why = "L7 policies apply to HTTP and TERMINATED_HTTPS listeners"
                option = "listener_id"
                out.append(Unsupported(ObjectKind.L7POLICY, policy.id, option, listener.id, why))
            continue
        port = SHARED_PORTS[GATEWAY_PROTOCOLS[listener.protocol]]
        if listener.protocol_port != port:
            out.append(Unsupported(ObjectKind.LISTENER, listener.id, "protocol_port",
                                   listener.protocol_port,
                                   f"the shared gateway serves {listener.protocol} on port "
                                   f"{port} only"))  # fmt: skip
        if listener.protocol == "TERMINATED_HTTPS" and listener.certificates == 0:
            why = "a TERMINATED_HTTPS listener needs its certificate"
            option = "default_tls_container_ref"
            out.append(Unsupported(ObjectKind.LISTENER, listener.id, option, None, why))
        for policy in listener.l7policies:
            out += _policy_refusals(policy)
        if listener.default_pool_id and not listener_hostnames(listener):
            why = (
                "the shared gateway routes by hostname: give the listener an L7 policy with "
                "a HOST_NAME EQUAL_TO rule first"
            )
            option, pool_id = "default_pool_id", listener.default_pool_id
            out.append(Unsupported(ObjectKind.LISTENER, listener.id, option, pool_id, why))
    for pool in _routed_pools(lb):
        if pool.protocol == "HTTPS":
            why = "the gateway speaks plain HTTP to the members of an L7 pool (no re-encryption)"
            out.append(Unsupported(ObjectKind.POOL, pool.id, "protocol", pool.protocol, why))
        ports = sorted({m.protocol_port for m in pool.members})
        if len(ports) > 1:
            why = "the gateway reaches one port on the members of a pool"
            out.append(Unsupported(ObjectKind.POOL, pool.id, "members.protocol_port", ports, why))
    return out


# ------------------------------------------------------------------ objects


def _enabled(policy: L7Policy) -> list[L7Rule]:
    return [r for r in policy.rules if r.admin_state_up]


def _hosts_of(policy: L7Policy) -> set[str]:
    return {r.value.lower() for r in _enabled(policy) if r.type == "HOST_NAME"}


def listener_hostnames(listener: Listener) -> list[str]:
    """The hostnames a listener serves: those its enabled policies name."""
    hosts: set[str] = set()
    for policy in listener.l7policies:
        named = _hosts_of(policy)
        if policy.admin_state_up and len(named) == 1:  # two names: a policy never matching
            hosts |= named
    return sorted(hosts)


def gateway_pools(lb: LoadBalancer) -> dict[str, bool]:
    """The pools the L7 listeners send to (default pools and policies' pools), each with
    whether a listener sending to it is up."""
    out: dict[str, bool] = {}
    for listener in lb.listeners:
        if not is_l7(listener):
            continue
        ids = [listener.default_pool_id] if listener.default_pool_id else []
        ids += [
            p.redirect_pool_id
            for p in listener.l7policies
            if p.action == "REDIRECT_TO_POOL" and p.redirect_pool_id
        ]
        for pool_id in ids:
            out[pool_id] = out.get(pool_id, False) or listener.admin_state_up
    return out


def _routed_pools(lb: LoadBalancer) -> list[Pool]:
    return [p for i in gateway_pools(lb) if (p := lb.pool(i)) is not None]


def service_name(pool_id: str) -> str:
    return f"pool-{pool_id}"


def gateway_name(lb: LoadBalancer) -> str:
    return f"lb-{lb.id}"


def secret_name(listener_id: str, index: int) -> str:
    return f"tls-{listener_id}-{index}"


def secret_names(lb: LoadBalancer) -> set[str]:
    """The Secrets (names in the Tenant namespace) the load balancer's listeners refer to."""
    return {
        mirrored_name(SOURCE_CLUSTER, lb.project_id, secret_name(li.id, i))
        for li in lb.listeners
        if li.protocol == "TERMINATED_HTTPS"
        for i in range(li.certificates)
    }


def _sni_split(listener: Listener) -> bool:
    """Whether a TERMINATED_HTTPS listener's certificates are served apart by SNI: more
    than one, each's names known (otherwise all are offered for all its hostnames)."""
    hosts = listener.certificate_hosts
    return listener.certificates > 1 and len(hosts) == listener.certificates


def _sni_sections(listener: Listener) -> dict[str, tuple[str, int]]:
    """Each hostname an SNI certificate serves (the first naming it: Octavia's SNI choice)
    -> its Gateway listener and that certificate's index. One Gateway listener per such
    hostname, with it as `hostname`: listeners on one port and protocol differ by
    hostname (the Gateway CRD refuses two alike), and each certificate is offered for its
    own names only. The certificate's first hostname's listener is `ID-sniN`, the next
    ones `ID-sniN-K`; the default certificate's is the listener's own id, hostname-less."""
    if not _sni_split(listener):
        return {}
    sections: dict[str, tuple[str, int]] = {}
    for host in listener_hostnames(listener):
        for index, names in enumerate(listener.certificate_hosts[1:], start=1):
            if covered_hostnames(names, [host]):
                taken = sum(1 for _, i in sections.values() if i == index)
                name = f"{listener.id}-sni{index}" + (f"-{taken + 1}" if taken else "")
                sections[host] = (name, index)
                break
    return sections


def _terminate(listener: Listener, index: int) -> dict[str, Any]:
    """A Gateway listener's `tls`: terminated with the listener's certificate `index`."""
    return {"mode": "Terminate", "certificateRefs": [{"name": secret_name(listener.id, index)}]}


def section_of(listener: Listener, host: str) -> str:
    """The Gateway listener a hostname's route attaches to: that of the first SNI
    certificate naming it, else the default certificate's (Octavia's SNI choice)."""
    return _sni_sections(listener).get(host, (listener.id, 0))[0]


def _short(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class _Meta:
    lb: LoadBalancer
    namespace: str

    def __call__(self, name: str, **extra: Any) -> dict[str, Any]:
        return {
            "name": mirrored_name(SOURCE_CLUSTER, self.lb.project_id, name),
            "namespace": self.namespace,
            "labels": {
                LABEL_CLUSTER: SOURCE_CLUSTER,
                LABEL_SOURCE_NAMESPACE: self.lb.project_id,
                LABEL_SOURCE_NAME: name,
                LABEL_LOADBALANCER: self.lb.id,
                **extra,
            },
        }


def _match(policy: L7Policy) -> dict[str, Any]:
    match: dict[str, Any] = {"path": {"type": "PathPrefix", "value": "/"}}
    headers = []
    for rule in _enabled(policy):
        if rule.type == "PATH":
            kind = "Exact" if rule.compare_type == "EQUAL_TO" else "PathPrefix"
            match["path"] = {"type": kind, "value": rule.value}
        elif rule.type == "HEADER":
            headers.append({"type": "Exact", "name": rule.key or "", "value": rule.value})
    if headers:
        match["headers"] = headers
    return match


def _redirect(policy: L7Policy) -> dict[str, Any]:
    url = policy.redirect_url if policy.action == "REDIRECT_TO_URL" else policy.redirect_prefix
    parts = urlsplit(url or "")
    redirect: dict[str, Any] = {
        "scheme": parts.scheme,
        "hostname": parts.hostname,
        "statusCode": policy.redirect_http_code or 302,
    }
    if parts.port:
        redirect["port"] = parts.port
    if policy.action == "REDIRECT_TO_URL":
        redirect["path"] = {"type": "ReplaceFullPath", "replaceFullPath": parts.path or "/"}
    return {"type": "RequestRedirect", "requestRedirect": redirect}


def _backend(lb: LoadBalancer, pool_id: str) -> list[dict[str, Any]]:
    pool = lb.pool(pool_id)
    if pool is None or not pool.admin_state_up:
        return []
    port = pool.members[0].protocol_port if pool.members else 1
    return [{"name": service_name(pool_id), "port": port}]


def _rule(lb: LoadBalancer, policy: L7Policy) -> dict[str, Any]:
    rule: dict[str, Any] = {"matches": [_match(policy)]}
    if policy.action == "REDIRECT_TO_POOL":
        rule["backendRefs"] = _backend(lb, policy.redirect_pool_id or "")
    else:
        rule["filters"] = [_redirect(policy)]
    return rule


def _routes(lb: LoadBalancer, listener: Listener, meta: _Meta) -> list[KubeObject]:
    out: list[KubeObject] = []
    policies = [p for p in listener.l7policies if p.admin_state_up]
    for host in listener_hostnames(listener):
        rules = [_rule(lb, p) for p in policies if _hosts_of(p) <= {host}]
        if listener.default_pool_id:
            rules.append(
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": _backend(lb, listener.default_pool_id),
                }
            )
        if not rules:
            continue
        name = f"route-{_short(listener.id, host)}"
        out.append(
            {
                "apiVersion": GATEWAY_API_VERSION,
                "kind": "HTTPRoute",
                "metadata": meta(name),
                "spec": {
                    "parentRefs": [
                        {"name": gateway_name(lb), "sectionName": section_of(listener, host)}
                    ],
                    "hostnames": [host],
                    "rules": rules,
                },
            }
        )
    return out


def _slices(lb: LoadBalancer, pool: Pool, meta: _Meta, backends: GatewayBackends) -> KubeObject:
    service = service_name(pool.id)
    port = pool.members[0].protocol_port if pool.members else 1
    by_family: dict[str, list[dict[str, Any]]] = {}
    for member in sorted(pool.members, key=lambda m: (m.address, m.id)):
        ready = lb.admin_state_up and member.admin_state_up and member.weight > 0
        family = "IPv6" if ":" in member.address else "IPv4"
        by_family.setdefault(family, []).append(
            {"addresses": [member.address], "conditions": {"ready": ready}}
        )
    family, endpoints = next(iter(sorted(by_family.items())), ("IPv4", []))
    body_meta = meta(
        service,
        **{
            MCS_SOURCE_CLUSTER: SOURCE_CLUSTER,
            MCS_SERVICE_NAME: service,
            MANAGED_BY: AGENT,
            LABEL_BACKENDS: backends.value,
        },
    )
    service_ports = [{"name": "", "port": port, "protocol": "TCP"}]
    body_meta["annotations"] = {
        ANNOTATION_SERVICE_PORTS: json.dumps(service_ports, separators=(",", ":")),
        **health_annotations(pool),  # the monitor, for the gateway's active checks
    }
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": body_meta,
        "addressType": family,
        "endpoints": endpoints,
        "ports": [{"name": "", "port": port, "protocol": "TCP"}],
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def tls_secrets(
    lb: LoadBalancer, listener_id: str, containers: Sequence[Mapping[str, Any]], namespace: str
) -> list[KubeObject]:
    """The TLS Secrets of a TERMINATED_HTTPS listener from Octavia's certificate containers
    (`default_tls_container_data`, then `sni_container_data`): certificate and
    intermediates as `tls.crt`, the key as `tls.key`."""
    meta = _Meta(lb, namespace)
    out: list[KubeObject] = []
    for index, container in enumerate(containers):
        chain = [_text(container.get("certificate"))]
        chain += [_text(c) for c in container.get("intermediates") or []]
        pem = "".join(c if c.endswith("\n") else c + "\n" for c in chain if c)
        key = _text(container.get("private_key"))
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": meta(secret_name(listener_id, index)),
                "type": "kubernetes.io/tls",
                "data": {
                    CERT_KEY: base64.b64encode(pem.encode()).decode(),
                    KEY_KEY: base64.b64encode(key.encode()).decode(),
                },
            }
        )
    return out


def gateway_objects(
    lb: LoadBalancer, namespace: str, backends: GatewayBackends = GatewayBackends.NODE_PORTS
) -> list[KubeObject]:
    """The Gateway, HTTPRoutes and EndpointSlices for the load balancer's L7 listeners in
    the Tenant's `namespace` (none without an L7 listener). `backends` is the Tenant's
    `gatewayBackends`, which the slices are labelled with so translation takes them.
    TLS Secrets come from :func:`tls_secrets` (their PEM is not in the tree)."""
    listeners = [li for li in lb.listeners if is_l7(li) and li.admin_state_up]
    if not listeners or not lb.admin_state_up:
        return []
    meta = _Meta(lb, namespace)
    gw_listeners = []
    for listener in listeners:
        protocol = GATEWAY_PROTOCOLS[listener.protocol]
        entry: dict[str, Any] = {
            "name": listener.id,
            "port": SHARED_PORTS[protocol],
            "protocol": protocol.value,
        }
        if protocol is ListenerProtocol.HTTPS and _sni_split(listener):
            # The default certificate's listener, and one per hostname an SNI certificate
            # serves (_sni_sections): each certificate offered for its own hostnames.
            gw_listeners.append({**entry, "tls": _terminate(listener, 0)})
            for host, (name, index) in _sni_sections(listener).items():
                gw_listeners.append(
                    {**entry, "name": name, "hostname": host, "tls": _terminate(listener, index)}
                )
            continue
        if protocol is ListenerProtocol.HTTPS:
            refs = [{"name": secret_name(listener.id, i)} for i in range(listener.certificates)]
            entry["tls"] = {"mode": "Terminate", "certificateRefs": refs}
        gw_listeners.append(entry)
    out: list[KubeObject] = [
        {
            "apiVersion": GATEWAY_API_VERSION,
            "kind": "Gateway",
            "metadata": meta(gateway_name(lb)),
            "spec": {"gatewayClassName": GATEWAY_CLASS, "listeners": gw_listeners},
        }
    ]
    for listener in listeners:
        out += _routes(lb, listener, meta)
    out += [_slices(lb, pool, meta, backends) for pool in _routed_pools(lb)]
    return out


def gateway_refusals(lb: LoadBalancer, tenant: Tenant) -> list[str]:
    """What the gateway's vetting refuses of the load balancer's objects for its Tenant
    (hostnames outside its DNS domains, a Tenant without the Gateway mode, unsafe paths
    or header values), each prefixed with the Octavia listener it comes from. Hostnames
    another tenant already serves and certificates are vetted by the gateway itself."""
    bodies = gateway_objects(lb, tenant.spec.namespace, tenant.spec.gateway_backends)
    objects: list[tuple[str, L7Object]] = []
    for body in bodies:
        if body["kind"] not in ("Gateway", "HTTPRoute"):
            continue
        obj, problems = parse_object(body)
        if obj is None or problems:
            return [f"{body['kind']}: {'; '.join(str(p) for p in problems)}"]
        parents = body["spec"].get("parentRefs") or [{}]
        section = str(parents[0].get("sectionName", "")).split("-sni")[0]
        where = f"listener {section}" if section else ""
        objects.append((where or f"load balancer {lb.id}", obj))  # type: ignore[arg-type]
    world = L7World([tenant], [o for _, o in objects], None)
    return [f"{where}: {r}" for where, obj in objects for r in vet_object(obj, world)]


__all__ = [
    "L7_PROTOCOLS",
    "LABEL_LOADBALANCER",
    "SOURCE_CLUSTER",
    "gateway_name",
    "gateway_objects",
    "gateway_pools",
    "gateway_refusals",
    "is_l7",
    "l7_refusals",
    "listener_hostnames",
    "secret_name",
    "secret_names",
    "section_of",
    "service_name",
    "tls_secrets",
]
