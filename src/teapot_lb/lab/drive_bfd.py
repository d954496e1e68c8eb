"""Run our BFD (``BfdEndpoint``) as a process inside a namespace, driven by JSON lines.

Usage: ``drive_bfd.py CONFIG.json`` via ``Host.popen``. CONFIG: ``{"sessions": [{"peer",
"local", "multihop", "tx_ms", "rx_ms", "mult", "passive", "min_ttl"}]}``. Every state
change is printed as ``{"event": "state", "peer", "new", "diagnostic", "at"}`` (``at``:
CLOCK_MONOTONIC).
Commands on stdin, one JSON object a line: ``{"cmd": "info", "peer"}`` (answered with
``{"event": "info", ...}``), ``{"cmd": "params", "peer", "tx_ms", "rx_ms", "mult",
"passive", "min_ttl"}``,
``{"cmd": "admin_down", "peer"}``, ``{"cmd": "admin_up", "peer"}``, ``{"cmd": "quit"}``.
End of stdin quits too. Logs go to stderr.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from teapot_lb import log
from teapot_lb.bfd.session import Parameters, StateChanged
from teapot_lb.bfd.transport import BfdEndpoint, SessionKey


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def parameters(spec: dict[str, Any]) -> Parameters:
    return Parameters(
        desired_min_tx=int(spec.get("tx_ms", 300) * 1000),
        required_min_rx=int(spec.get("rx_ms", 300) * 1000),
        detect_mult=int(spec.get("mult", 3)),
        passive=bool(spec.get("passive", False)),
        min_ttl=spec.get("min_ttl"),
    )


def on_state(key: SessionKey, change: StateChanged) -> None:
    say(event="state", peer=key.peer, new=change.new.name, diagnostic=change.diagnostic.name,
        at=time.monotonic())  # fmt: skip


async def main(config: dict[str, Any]) -> None:
    endpoint = BfdEndpoint(on_state)
    keys: dict[str, SessionKey] = {}
    for spec in config["sessions"]:
        key = SessionKey(spec["peer"], spec["local"], bool(spec.get("multihop", False)))
        keys[key.peer] = key
        endpoint.add(key, parameters(spec))
    say(event="ready")
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        command = json.loads(line)
        cmd = command["cmd"]
        if cmd == "quit":
            break
        key = keys[command["peer"]]
        if cmd == "info":
            session = endpoint.session(key)
            assert session is not None
            say(event="info", peer=key.peer, state=session.state.name,
                transmit_interval_us=session.transmit_interval,
                detection_time_us=session.detection_time, polling=session.polling,
                remote_min_rx_us=session.remote_min_rx,
                remote_desired_min_tx_us=session.remote_desired_min_tx,
                remote_detect_mult=session.remote_detect_mult,
                sending=session.sending)  # fmt: skip
        elif cmd == "params":
            endpoint.change_parameters(key, parameters(command))
        elif cmd == "admin_down":
            endpoint.admin_down(key)
        elif cmd == "admin_up":
            endpoint.admin_up(key)
    endpoint.close()


if __name__ == "__main__":
    log.configure("info", json=True, component="bfd-driver")
    with open(sys.argv[1]) as f:
        asyncio.run(main(json.load(f)))
