"""Errors from the Kubernetes API, independent of the client library.

Code outside ``kube/`` catches these, never ``kubernetes_asyncio`` exceptions.
"""

from __future__ import annotations


class KubeError(Exception):
    """Any failure talking to the API server."""


class Unreachable(KubeError):
    """The request did not get an answer (connection refused or reset, timeout)."""


class StreamCut(Unreachable):
    """An open watch stream broke off (reset, or silent past its read timeout)."""


class ApiStatusError(KubeError):
    """The server answered with an error ``Status``."""

    def __init__(
        self, code: int, reason: str, message: str, *, retry_after_s: float | None = None
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        # When to try again, as the server asked (Retry-After, or the Status's
        # details.retryAfterSeconds); None if it did not say.
        self.retry_after_s = retry_after_s


class Forbidden(ApiStatusError):
    """403 Forbidden: RBAC does not allow this verb on this resource (in this namespace)."""


class NotFound(ApiStatusError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ApiStatusError):
    """409 Conflict: our resourceVersion was stale; re-read and try again."""


class AlreadyExists(ApiStatusError):
    """409 AlreadyExists: create of a name that is taken."""


class Gone(ApiStatusError):
    """410 Gone / Expired: the resourceVersion is older than the server's history."""


def status_error(
    code: int, reason: str, message: str, *, retry_after_s: float | None = None
) -> ApiStatusError:
    """The most specific error class for an HTTP status code and ``Status.reason``."""
    if code == 403:
        return Forbidden(code, reason, message)
    if code == 404:
        return NotFound(code, reason, message)
    if code == 409:
        if reason == "AlreadyExists":
            return AlreadyExists(code, reason, message)
        return Conflict(code, reason, message)
    if code == 410:
        return Gone(code, reason, message)
    return ApiStatusError(code, reason, message, retry_after_s=retry_after_s)
