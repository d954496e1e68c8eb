"""How long to wait before trying the API server again (pure: the random source is an
argument).

:class:`Backoff` is one exponential, jittered, capped sequence of delays.
:class:`Retry` picks the delay after a failed list or watch by what failed, and forgets
everything on the next success (a list, or any watch event):

- 410 Gone: re-list at once; only a Gone again before any watch event waits (a server
  whose history is shorter than one list-and-watch round trip would otherwise spin);
- connection refused, reset or timed out, and 5xx: short delays (0.1 s doubling, capped at
  1 s), so that a restarted API server is seen within about a second of answering; the
  jitter keeps many nodes from retrying in step;
- 429 Too Many Requests: the server's Retry-After, but never more than a small cap (an API
  server that has just started answers 429 while its storage initialises);
- other refusals (403 Forbidden, 404 for a missing CRD): longer delays (0.5 s doubling,
  capped at 5 s) — a person has to fix something, and retrying faster only adds load.

client-go's reflector backs off up to 30 s, which is what a node waits after an outage;
these caps keep recovery within seconds.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .errors import ApiStatusError, Gone


class Backoff:
    """Delays ``initial * factor**n``, capped at ``maximum``, each stretched by up to
    ``jitter`` (a fraction) so that many clients failing together do not retry together."""

    def __init__(
        self,
        initial: float = 0.2,
        maximum: float = 30.0,
        *,
        factor: float = 2.0,
        jitter: float = 0.5,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or maximum < initial or factor < 1 or jitter < 0:
            raise ValueError("backoff needs 0 < initial <= maximum, factor >= 1, jitter >= 0")
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self._rand = rand
        self.failures = 0

    def next(self) -> float:
        """The delay before the next attempt; counts one more failure."""
        # The exponent stops growing at the cap (no float overflow after a long outage).
        base = self.maximum
        if self.failures < 64:
            base = min(self.maximum, self.initial * self.factor**self.failures)
        self.failures += 1
        return base * (1.0 + self.jitter * self._rand())

    def reset(self) -> None:
        self.failures = 0


class Retry:
    """The delay after each failure of a list/watch loop, by the kind of failure."""

    def __init__(
        self,
        backoff: Backoff | None = None,
        *,
        refused: Backoff | None = None,
        retry_after_max_s: float = 2.0,
    ) -> None:
        self.backoff = backoff or Backoff(0.1, 1.0)
        self.refused = refused or Backoff(0.5, 5.0)
        self.retry_after_max_s = retry_after_max_s
        self._gone_in_a_row = 0

    def delay(self, err: BaseException) -> float:
        """Seconds to wait before trying again after `err`; counts the failure."""
        if isinstance(err, Gone):
            self._gone_in_a_row += 1
            return 0.0 if self._gone_in_a_row == 1 else self.backoff.next()
        if isinstance(err, ApiStatusError):
            if err.code == 429:
                fallback = self.backoff.next()
                wanted = fallback if err.retry_after_s is None else err.retry_after_s
                return min(self.retry_after_max_s, wanted)
            if 400 <= err.code < 500:
                return self.refused.next()
        return self.backoff.next()

    def listed(self) -> None:
        """A list succeeded: the server answers again."""
        self.backoff.reset()
        self.refused.reset()

    def watched(self) -> None:
        """A watch event arrived: the watch works again."""
        self.listed()
        self._gone_in_a_row = 0

    @property
    def failures(self) -> int:
        return self.backoff.failures + self.refused.failures + self._gone_in_a_row
