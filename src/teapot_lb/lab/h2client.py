"""A minimal HTTP/2 client for the gateway lab and its tests, run inside a namespace: one TLS
connection (ALPN h2; the SNI given, or none), then one GET per authority given, one after
the other on that same connection (as a browser reuses a connection for another name its
certificate covers, RFC 9113 section 9.1.1). Prints one JSON line, per request:
{"authority", "status", "body"}.

    python h2client.py ADDRESS PORT SNI|- AUTHORITY...

Just enough HTTP/2 (RFC 9113) and HPACK (RFC 7541) for that: requests are literal header
fields without indexing and without Huffman coding; of an answer's headers only :status
is read, which HAProxy sends first, as a static table index or as a literal with the
indexed name :status; anything else is an error, never a guess.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import sys

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS, PING, GOAWAY, CONTINUATION = 0x0, 0x1, 0x4, 0x6, 0x7, 0x9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
STATIC_STATUS = {8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500}


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return (
        struct.pack("!I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack("!I", stream)
        + payload
    )


def literal(name: str, value: str) -> bytes:
    """A literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    n, v = name.encode(), value.encode()
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def status_of(block: bytes) -> int:
    first = block[0]
    if first & 0x80 and (first & 0x7F) in STATIC_STATUS:
        return STATIC_STATUS[first & 0x7F]
    if first == 0x48 and block[1] == 3:  # literal with incremental indexing, name 8
        return int(block[2:5].decode())
    raise ValueError(f"an answer's first header is not :status as expected: {block[:8].hex()}")


class Connection:
    def __init__(self, address: str, port: int, sni: str | None) -> None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the tests check the certificate by other means
        ctx.set_alpn_protocols(["h2"])
        raw = socket.create_connection((address, port), timeout=10)
        self.sock = ctx.wrap_socket(raw, server_hostname=sni)
        if self.sock.selected_alpn_protocol() != "h2":
            raise SystemExit(f"ALPN chose {self.sock.selected_alpn_protocol()!r}, not h2")
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
        self.buffer = b""
        self.next_stream = 1

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the server closed the connection")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _frame(self) -> tuple[int, int, int, bytes]:
        head = self._read(9)
        length = int.from_bytes(head[:3], "big")
        stream = struct.unpack("!I", head[5:9])[0] & 0x7FFFFFFF
        return head[3], head[4], stream, self._read(length)

    def get(self, authority: str, path: str = "/") -> dict[str, object]:
        stream, self.next_stream = self.next_stream, self.next_stream + 2
        block = b"".join(
            literal(k, v)
            for k, v in ((":method", "GET"), (":scheme", "https"),
                         (":authority", authority), (":path", path))
        )  # fmt: skip
        self.sock.sendall(frame(HEADERS, END_STREAM | END_HEADERS, stream, block))
        status, body, headers = 0, b"", b""
        while True:
            kind, flags, sid, payload = self._frame()
            if kind == SETTINGS and not flags & ACK:
                self.sock.sendall(frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                self.sock.sendall(frame(PING, ACK, 0, payload))
            elif kind == GOAWAY:
                raise EOFError(f"GOAWAY: {payload[4:8].hex()}")
            elif sid != stream:
                continue
            elif kind in (HEADERS, CONTINUATION):
                headers += payload
                if flags & END_HEADERS and not status:
                    status = status_of(headers)
                    headers = b""
                if flags & END_STREAM:
                    break
            elif kind == DATA:
                body += payload
                if flags & END_STREAM:
                    break
        return {"authority": authority, "status": status, "body": body.decode(errors="replace")}


def main() -> None:
    address, port, sni, *authorities = sys.argv[1:]
    conn = Connection(address, int(port), None if sni == "-" else sni)
    print(json.dumps([conn.get(a) for a in authorities]))


if __name__ == "__main__":
    main()
