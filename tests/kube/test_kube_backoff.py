"""Retry delays: by what failed, bounded, forgotten on success."""

from __future__ import annotations

from teapot_lb.kube.backoff import Backoff, Retry
from teapot_lb.kube.errors import ApiStatusError, Forbidden, Gone, Unreachable


def steady() -> Retry:
    """No jitter, so delays can be compared exactly."""
    return Retry(Backoff(0.1, 1.0, jitter=0.0), refused=Backoff(0.5, 5.0, jitter=0.0))


def test_an_unreachable_server_is_retried_fast_and_never_slower_than_the_cap() -> None:
    retry = steady()
    delays = [retry.delay(Unreachable("refused")) for _ in range(50)]
    assert delays[:4] == [0.1, 0.2, 0.4, 0.8]
    assert max(delays) == 1.0


def test_jitter_stretches_a_delay_by_at_most_its_fraction() -> None:
    retry = Retry(Backoff(0.1, 1.0, jitter=0.5, rand=lambda: 1.0))
    assert max(retry.delay(Unreachable("x")) for _ in range(20)) == 1.5


def test_a_410_relists_at_once_even_after_a_long_outage() -> None:
    retry = steady()
    for _ in range(20):
        retry.delay(Unreachable("down"))
    assert retry.delay(Gone(410, "Expired", "too old resource version")) == 0.0


def test_a_second_410_before_any_watch_event_waits() -> None:
    retry = steady()
    gone = Gone(410, "Expired", "too old")
    assert retry.delay(gone) == 0.0
    retry.listed()
    assert retry.delay(gone) > 0.0
    retry.watched()
    assert retry.delay(gone) == 0.0


def test_success_forgets_the_failures() -> None:
    retry = steady()
    for _ in range(10):
        retry.delay(Unreachable("down"))
        retry.delay(Forbidden(403, "Forbidden", "no"))
    retry.listed()
    assert retry.delay(Unreachable("down")) == 0.1
    assert retry.delay(Forbidden(403, "Forbidden", "no")) == 0.5


def test_429_honours_retry_after_up_to_a_small_cap() -> None:
    retry = steady()
    assert retry.delay(ApiStatusError(429, "TooManyRequests", "x", retry_after_s=0.3)) == 0.3
    assert retry.delay(ApiStatusError(429, "TooManyRequests", "x", retry_after_s=60)) == 2.0
    assert retry.delay(ApiStatusError(429, "TooManyRequests", "x")) <= 2.0


def test_refusals_back_off_slower_but_bounded() -> None:
    retry = steady()
    delays = [retry.delay(Forbidden(403, "Forbidden", "rbac")) for _ in range(30)]
    assert delays[0] == 0.5 and max(delays) == 5.0


def test_server_errors_are_retried_like_an_unreachable_server() -> None:
    retry = steady()
    assert retry.delay(ApiStatusError(503, "ServiceUnavailable", "etcd")) == 0.1


def test_the_delay_stays_finite_after_very_many_failures() -> None:
    backoff = Backoff(0.1, 1.0, jitter=0.0)
    for _ in range(5000):
        assert backoff.next() <= 1.0
