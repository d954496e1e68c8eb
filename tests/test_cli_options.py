"""The long-running commands keep their options (names, defaults, types, flags) as their
shared decorators (teapot_lb.cli.serve) declare them: cli_options.json was written from
the commands before they shared them (UPDATE_CLI_OPTIONS=1 rewrites it after a deliberate
change)."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import click
import pytest

from teapot_lb.cli import COMMANDS

GOLDEN = Path(__file__).with_name("cli_options.json")
SERVING = ["controller", "manager", "ovn", "relay", "tenant-agent"]


def options_of(name: str) -> list[dict[str, Any]]:
    module, attr = COMMANDS[name]
    command = getattr(importlib.import_module(module), attr)
    out = []
    for p in command.params:
        if isinstance(p, click.Option):
            default = p.default
            if default is None or callable(default) or str(default) == "Sentinel.UNSET":
                default = None  # no default given or None given: the value is None alike
            out.append(
                {
                    "opts": p.opts,
                    "secondary_opts": p.secondary_opts,
                    "default": default if default in (None, True, False) else str(default),
                    "required": p.required,
                    "multiple": p.multiple,
                    "is_flag": p.is_flag,
                    "type": p.type.to_info_dict(),
                    "envvar": p.envvar,
                    "show_default": p.show_default,
                }
            )
    return out


@pytest.mark.parametrize("name", SERVING)
def test_a_serving_command_keeps_its_options(name: str) -> None:
    now = json.loads(json.dumps(options_of(name)))  # tuples as JSON lists
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if os.environ.get("UPDATE_CLI_OPTIONS"):
        golden[name] = now
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    assert now == golden[name]
