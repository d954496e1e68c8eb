"""A stand-in for Neutron's API, for the Octavia lab stack: not Neutron.

The ``openstack`` CLI (python-octaviaclient) looks a load balancer's ``--vip-subnet-id``
or ``--vip-network-id`` up in Neutron before it calls Octavia, and the teapot provider
takes the VIP from the project's Tenant, not from the subnet: the lab answers those
look-ups and nothing else. It serves, read-only, one network and one subnet standing for
"teapot VIPs" (docs/octavia.md, "Projects and Tenants"): version discovery, ``GET
/v2.0/networks`` and ``/v2.0/subnets`` (filtered by ``id`` or ``name``) and each by id.
Anything else is answered 501 with a body saying it is a stand-in.

Run: ``python -m teapot_lb.lab.neutron --port 9696`` (prints the ids it serves).
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

NETWORK_ID = "7e3a1b4c-0d2f-4e5a-9b6c-1d2e3f4a5b6c"
SUBNET_ID = "11111111-2222-4333-8444-555555555555"
NAME = "teapot-vips"


@dataclass(frozen=True)
class VipNetwork:
    """The one network and subnet the stand-in serves."""

    network_id: str = NETWORK_ID
    subnet_id: str = SUBNET_ID
    name: str = NAME
    cidr: str = "203.0.113.0/24"

    def network(self) -> dict[str, Any]:
        return {"id": self.network_id, "name": self.name, "status": "ACTIVE",
                "admin_state_up": True, "shared": True, "subnets": [self.subnet_id],
                "project_id": "", "tenant_id": ""}  # fmt: skip

    def subnet(self) -> dict[str, Any]:
        return {"id": self.subnet_id, "name": self.name, "network_id": self.network_id,
                "cidr": self.cidr, "ip_version": 4, "enable_dhcp": False,
                "gateway_ip": None, "project_id": "", "tenant_id": ""}  # fmt: skip


def answer(vips: VipNetwork, method: str, url: str, base: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of one request (pure)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if method != "GET":
        return 501, {"NeutronError": {"type": "NotImplemented",
                                      "message": "the teapot-lb lab's Neutron stand-in only "
                                                 "answers look-ups"}}  # fmt: skip
    if path in ("", "/v2.0"):
        link = {"href": f"{base}/v2.0/", "rel": "self"}
        version = {"id": "v2.0", "status": "CURRENT", "links": [link]}
        return 200, {"versions": [version]} if path == "" else {"resources": []}
    kinds: Mapping[str, tuple[str, dict[str, Any]]] = {
        "/v2.0/networks": ("network", vips.network()),
        "/v2.0/subnets": ("subnet", vips.subnet()),
    }
    for prefix, (singular, obj) in kinds.items():
        if path == prefix:
            query = parse_qs(parts.query)
            wanted = all(obj.get(k) in values for k, values in query.items() if k in ("id", "name"))
            return 200, {f"{singular}s": [obj] if wanted else []}
        if path.startswith(prefix + "/"):
            if path[len(prefix) + 1 :] == obj["id"]:
                return 200, {singular: obj}
            return 404, {"NeutronError": {"type": f"{singular.title()}NotFound",
                                          "message": f"{singular} {path} not found"}}  # fmt: skip
    return 501, {"NeutronError": {"type": "NotImplemented",
                                  "message": f"{path}: not served by the teapot-lb lab's "
                                             "Neutron stand-in"}}  # fmt: skip


def serve(
    port: int, vips: VipNetwork | None = None, host: str = "127.0.0.1"
) -> ThreadingHTTPServer:
    """Start the stand-in in a thread; `.shutdown()` stops it."""
    served = vips or VipNetwork()
    base = f"http://{host}:{port}"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._reply()

        def do_POST(self) -> None:
            self._reply()

        def _reply(self) -> None:
            status, body = answer(served, self.command, self.path, base)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="neutron-standin", daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=9696)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    server = serve(args.port, host=args.host)
    vips = VipNetwork()
    print(f"neutron stand-in on http://{args.host}:{args.port}: network {vips.network_id}, "
          f"subnet {vips.subnet_id} ({vips.name})", flush=True)  # fmt: skip
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
