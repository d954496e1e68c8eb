"""Fixtures of the OVN mode tests: a Northbound ovsdb-server per module, an owner per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from teapot_lb.lab.ovnstack import DATABASE_BINARIES, OVNDatabases, missing


@pytest.fixture(scope="module")
def nb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OVNDatabases]:
    """A Northbound ovsdb-server (no northd: rows only) with router gr0 and switch ls0."""
    reason = missing(DATABASE_BINARIES)
    if reason:
        pytest.skip(reason)
    with OVNDatabases(tmp_path_factory.mktemp("nb"), southbound=False) as dbs:
        dbs.nbctl("lr-add", "gr0")
        dbs.nbctl("ls-add", "ls0")
        yield dbs


@pytest.fixture
def owner(request: pytest.FixtureRequest) -> str:
    """The test's own cluster name: its rows are apart from every other test's."""
    return request.node.name.removeprefix("test_")[:40].replace("_", "-")
