"""BGP unit tests: no test may end with an internal error logged by the speaker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def no_internal_errors() -> Iterator[list[dict[str, object]]]:
    """Speaker code contains every exception per peer and logs it at error level;
    such a log means a bug even when the test's own assertions pass."""
    with structlog.testing.capture_logs() as logs:
        yield logs
    errors = [e for e in logs if e.get("log_level") in ("error", "critical")]
    assert not errors, f"internal errors logged: {errors}"
