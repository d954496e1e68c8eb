"""A hostile tenant speaker for the hijack suite: opens a BGP session to the relay with the
source address, ASN, TTL and MD5 key it is told, then sends whatever raw UPDATEs the test
hands it (malformed ones included), and reports what the relay says.

    python attacker.py '{"src": "192.0.2.13", "dst": "192.0.2.2", "asn": 64601, ...}'

stdin, one JSON object a line: ``{"send": "<hex of BGP messages>"}``, ``{"quit": true}``.
stdout, one JSON object a line: ``{"event": "established"}``, ``{"event": "notification",
"code": C, "subcode": S}``, ``{"event": "closed"}``, ``{"event": "connect-failed", ...}``,
``{"event": "sent"}``.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from ipaddress import IPv4Address, ip_address

from teapot_lb.bgp.transport import set_md5, set_min_ttl, set_ttl
from teapot_lb.bgp.wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    Keepalive,
    Multiprotocol,
    Notification,
    Open,
    decode_stream,
)

HOLD = 9


def say(**event: object) -> None:
    print(json.dumps(event), flush=True)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    family = socket.AF_INET6 if ip_address(cfg["dst"]).version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(cfg.get("connect_timeout", 3))
    if cfg.get("password"):
        set_md5(sock, cfg["dst"], cfg["password"])
    set_ttl(sock, cfg.get("ttl", 255))
    if cfg.get("ttl", 255) == 255:
        set_min_ttl(sock, 255)
    sock.bind((cfg["src"], 0))
    try:
        sock.connect((cfg["dst"], 179))
    except OSError as err:
        say(event="connect-failed", error=str(err))
        return
    sock.settimeout(None)
    caps = (Multiprotocol(IPV4_UNICAST), Multiprotocol(IPV6_UNICAST))
    sock.sendall(Open.build(cfg["asn"], HOLD, IPv4Address(cfg["router_id"]), caps).pack())
    lock = threading.Lock()
    done = threading.Event()

    def keepalives() -> None:
        while not done.wait(HOLD / 3):
            with lock:
                try:
                    sock.sendall(Keepalive().pack())
                except OSError:
                    return

    def reader() -> None:
        buf = b""
        established = False
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                say(event="closed")
                done.set()
                return
            buf += data
            # Whole messages only: the header's length field says where each ends.
            while len(buf) >= 19 and len(buf) >= int.from_bytes(buf[16:18], "big"):
                n = int.from_bytes(buf[16:18], "big")
                chunk, buf = buf[:n], buf[n:]
                for msg in decode_stream(chunk):
                    if isinstance(msg, Notification):
                        say(event="notification", code=msg.code, subcode=msg.subcode)
                    elif isinstance(msg, Open):
                        with lock:
                            sock.sendall(Keepalive().pack())
                    elif isinstance(msg, Keepalive) and not established:
                        established = True
                        say(event="established")

    threading.Thread(target=keepalives, daemon=True).start()
    threading.Thread(target=reader, daemon=True).start()
    for line in sys.stdin:
        order = json.loads(line)
        if order.get("quit"):
            break
        with lock:
            try:
                sock.sendall(bytes.fromhex(order["send"]))
            except OSError as err:
                say(event="send-failed", error=str(err))
                continue
        say(event="sent")
    done.set()
    sock.close()


if __name__ == "__main__":
    main()
