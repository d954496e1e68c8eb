"""The `teapot-lb` command line."""

from __future__ import annotations

from click.testing import CliRunner

from teapot_lb import __version__
from teapot_lb.cli import COMMANDS, main


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.output


def test_help_lists_the_components() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for component in ("controller", "speaker", "run", "lab", "explain", "validate"):
        assert component in result.output


def test_every_listed_command_loads() -> None:
    for name in COMMANDS:
        result = CliRunner().invoke(main, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "Usage:" in result.output
