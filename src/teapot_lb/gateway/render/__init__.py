"""GatewayConfig → haproxy.cfg, crt-lists and certificate files. Pure: no file is read or
written here (the driver does both), certificate PEMs come in as text.

Layout of the rendered configuration:
- one frontend per HAProxy listener (`fe_<listener>`): HTTP and HTTPS in http mode, TLS
  passthrough and TCP in tcp mode; HTTPS binds with a crt-list (SNI picks the certificate;
  its first line, the default, is the gateway's own certificate, never a tenant's) and
  ALPN (h2, http/1.1); an HTTPS request whose Host would not have chosen the certificate
  its connection's SNI chose is answered 421 (two maps, name -> certificate, looked up
  for both when they differ; see :func:`.certificates.misdirected`); an HTTPS and a TLS passthrough
  listener may share one IP:port: the passthrough frontend binds it, sends its SNIs to
  their backends and every other connection through an internal hop (an abstract socket,
  PROXY v2 so the client's address survives) to the terminating frontend, which binds
  the hop;
- HTTP routing in three steps, so that precedence is data rather than nested ifs:
  `txn.vh` := the first virtual host that covers the Host header (routing.table's order);
  `txn.rule` := the first entry of that virtual host whose conditions hold; then every
  rule's actions (redirect, header modifiers, weighted use_backend) keyed on `txn.rule`;
- one backend per config backend (`be_<backend>`) with a fixed number of server slots
  (slots.py); a slot's address and state are runtime state, so the *structure* of the
  configuration (what needs a reload to change) is the text with slot addresses masked.

The package is its API (import from ``teapot_lb.gateway.render``); its modules are
HAProxy's words (:mod:`.words`: quoting, names, constants), where the files live
(:mod:`.paths`), the conditions of a virtual host and a match (:mod:`.conditions`), what a
rule does (:mod:`.actions`), the frontends (:mod:`.frontends`), an HTTPS listener's
certificates (:mod:`.certificates`), the backend sections (:mod:`.backends`) and the whole
rendering with its reuse of the last one (:mod:`.rendering`).
"""

from __future__ import annotations

from .actions import location
from .backends import expected_status
from .certificates import Offer, certificate_maps, chosen_certificate, crt_list, offered, offers
from .paths import Paths
from .rendering import (
    BackendSection,
    HTTPFrontend,
    Parts,
    Rendered,
    render,
    sections,
    shared_sockets,
)
from .words import (
    DEFAULT_CERTIFICATE,
    DEFAULT_SNI,
    EMPTY_SLOT,
    HAPROXY_PROTOCOLS,
    NO_CERTIFICATE,
    SLOT_MASK,
    backend_id,
    frontend_id,
    hop_id,
    host_port,
    log_format,
    quote,
    server_name,
)

__all__ = [
    "DEFAULT_CERTIFICATE",
    "DEFAULT_SNI",
    "EMPTY_SLOT",
    "HAPROXY_PROTOCOLS",
    "NO_CERTIFICATE",
    "SLOT_MASK",
    "BackendSection",
    "HTTPFrontend",
    "Offer",
    "Parts",
    "Paths",
    "Rendered",
    "backend_id",
    "certificate_maps",
    "chosen_certificate",
    "crt_list",
    "expected_status",
    "frontend_id",
    "hop_id",
    "host_port",
    "location",
    "log_format",
    "offered",
    "offers",
    "quote",
    "render",
    "sections",
    "server_name",
    "shared_sockets",
]
