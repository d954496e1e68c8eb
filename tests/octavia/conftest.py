from collections.abc import Iterator
from typing import Any

import pytest

from fakeapi.fixtures import fake_api, fake_api_options
from teapot_lb.lab.octavia import Rest, Stack, running
from teapot_lb.lab.octavia_stack import api_objects, api_sweep, connection


@pytest.fixture(scope="package")
def api_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Rest, Any]]:
    """One Octavia stack for test_octavia_api and test_octavia_tls_api (a stack start
    costs 20-70 s): Tenants acme, bolt and tiny (stack.api_objects), a fast sweep."""
    with running(tmp_path_factory.mktemp("octapi"), objects=api_objects(), teapot=api_sweep()) as (
        stack,
        rest,
    ):
        yield stack, rest, connection(stack)


__all__ = ["api_stack", "fake_api", "fake_api_options"]
