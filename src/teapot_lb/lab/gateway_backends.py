"""Backend servers for the gateway's end-to-end tests, run inside a namespace:

    python gateway_backends.py KIND:NAME:ADDR:PORT[:CERT:KEY] ...

- http: answers every request with JSON: its name, the path, the request headers (by
  name, and as a list of every line: repeated headers)
  (`/slow/<ms>` answers after that many milliseconds: a request in flight);
- proxyhttp: the same, after reading a PROXY protocol v2 header (reports the source it
  carried as `proxied_from`);
- tls: HTTPS (its own certificate) answering its name: a TLS passthrough target;
- tcp: echoes each line prefixed with its name; udp: the same per datagram.
Prints "ready" once every socket listens.
"""

from __future__ import annotations

import ipaddress
import json
import socketserver
import ssl
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROXY_V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def _http_handler(name: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        proxied_from = ""

        def do_GET(self) -> None:
            if self.path.startswith("/slow/"):
                time.sleep(int(self.path.split("/")[2]) / 1000)
            body = json.dumps(
                {
                    "name": name,
                    "path": self.path,
                    "method": self.command,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "header_list": [[k.lower(), v] for k, v in self.headers.items()],
                    "proxied_from": self.proxied_from,
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET
        do_PUT = do_GET

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def _proxy_handler(name: str) -> type[BaseHTTPRequestHandler]:
    base = _http_handler(name)

    class Handler(base):  # type: ignore[valid-type, misc]
        def setup(self) -> None:
            super().setup()
            head = self.rfile.read(16)
            if head[:12] != PROXY_V2_SIGNATURE:
                self.proxied_from = "none"
                return
            length = struct.unpack("!H", head[14:16])[0]
            payload = self.rfile.read(length)
            if head[13] >> 4 == 1 and length >= 12:  # AF_INET
                self.proxied_from = str(ipaddress.IPv4Address(payload[:4]))

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True


def _tcp(name: str, addr: str, port: int) -> socketserver.BaseServer:
    class Echo(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for line in self.rfile:
                self.wfile.write(f"{name} ".encode() + line)

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    return Server((addr, port), Echo)


def _udp(name: str, addr: str, port: int) -> socketserver.BaseServer:
    class Echo(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data, sock = self.request
            sock.sendto(f"{name} ".encode() + data, self.client_address)

    return socketserver.ThreadingUDPServer((addr, port), Echo)


def serve(spec: str) -> socketserver.BaseServer:
    kind, name, addr, port, *rest = spec.split(":")
    if kind == "http":
        return _Server((addr, int(port)), _http_handler(name))
    if kind == "proxyhttp":
        return _Server((addr, int(port)), _proxy_handler(name))
    if kind == "tls":
        server = _Server((addr, int(port)), _http_handler(name))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(rest[0], rest[1])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        return server
    if kind == "tcp":
        return _tcp(name, addr, int(port))
    if kind == "udp":
        return _udp(name, addr, int(port))
    raise SystemExit(f"unknown backend kind {kind!r}")


def main() -> None:
    servers = [serve(spec) for spec in sys.argv[1:]]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()  # until killed


if __name__ == "__main__":
    main()
