"""ExaBGP API process: record what ExaBGP reports, optionally feed it commands.

Usage: exabgp_api.py RECORD [COMMANDS]

Every JSON line ExaBGP writes to our stdin is appended to RECORD (flushed at once, so
the test harness can replay it while ExaBGP runs). With COMMANDS, its lines (e.g.
``announce route 198.51.100.1/32 next-hop self``) are written to ExaBGP once the first
session is up, which is how a controller would drive ExaBGP dynamically.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    record = open(sys.argv[1], "a", buffering=1)  # noqa: SIM115 - lives as long as we do
    commands = sys.argv[2] if len(sys.argv) > 2 else None
    for line in sys.stdin:
        record.write(line)
        if commands is None:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("type") == "state" and msg.get("neighbor", {}).get("state") == "up":
            with open(commands) as f:
                for cmd in f:
                    sys.stdout.write(cmd)
            sys.stdout.flush()
            record.write(json.dumps({"type": "api-commands-sent"}) + "\n")
            commands = None


if __name__ == "__main__":
    main()
