"""Adj-RIB-Out and Adj-RIB-In (RFC 4271 §3.2), pure.

The package is its API; its modules are the compiled routes (:mod:`.compiled`), the
Adj-RIB-Out with the UPDATE packing (:mod:`.adj_out`) and the Adj-RIB-In (:mod:`.adj_in`).

The Adj-RIB-Out holds what the caller wants advertised (prefix → :class:`RouteAttributes`)
and what was sent; :meth:`AdjRibOut.updates` returns the minimal UPDATEs that move the
peer from one to the other (after the peer's export filter), packing all prefixes with
identical attributes into as few 4096-byte messages as possible. The Adj-RIB-In holds what
the peer sent and its import filter accepted, and why the rest was rejected.

Both keep prefixes in their NLRI encoding (bytes), per family, so the hot paths are dict
operations and ``bytes.join``: no ``ipaddress`` object is built until someone asks
(:attr:`AdjRibIn.routes`, :meth:`AdjRibIn.get`). The export encoding is done once per
:func:`compile_routes`, shared by every peer.

ADD-PATH (RFC 7911): for a family where it was negotiated, the keys are the Path
Identifier followed by the prefix's encoding, so each path of a prefix is diffed, sent and
withdrawn on its own; the packing code does not know the difference. A prefix with several
paths (:class:`~teapot_lb.bgp.attributes.Paths`) gives a peer without ADD-PATH its first path only.
"""

from __future__ import annotations

from ..attributes import DEFAULT_ATTRIBUTES, Paths, ReceivedPath, RouteAttributes
from .adj_in import AdjRibIn, decode_encodings
from .adj_out import (
    AdjRibOut,
    ExportContext,
    export_attributes,
    pack_announcements,
    pack_withdrawals,
)
from .compiled import (
    EMPTY_ROUTES,
    CompiledRoutes,
    PrefixKey,
    as_prefix,
    change_compiled,
    compile_routes,
    encode_prefix,
    path_id,
    path_ids,
)

__all__ = [
    "DEFAULT_ATTRIBUTES",
    "EMPTY_ROUTES",
    "AdjRibIn",
    "AdjRibOut",
    "CompiledRoutes",
    "ExportContext",
    "Paths",
    "PrefixKey",
    "ReceivedPath",
    "RouteAttributes",
    "as_prefix",
    "change_compiled",
    "compile_routes",
    "decode_encodings",
    "encode_prefix",
    "export_attributes",
    "pack_announcements",
    "pack_withdrawals",
    "path_id",
    "path_ids",
]
