"""The lab's progress display: messages scroll above a status line on a terminal."""

from __future__ import annotations

import io
from itertools import count

from teapot_lb.lab.progress import CLEAR_LINE, TerminalProgress, phase_of, status_line


def test_the_phase_comes_from_the_scenario_messages() -> None:
    modes, families = ("bgp", "l2", "vip"), ("v4", "v6")
    assert phase_of("l2  v6 lab/l2-v6-1 created", modes, families) == ("l2", "v6")
    assert phase_of("lab: namespaces up", modes, families) is None
    assert phase_of("l2 v9 nonsense", modes, families) is None


def test_on_a_terminal_each_message_is_followed_by_the_status_line() -> None:
    messages, screen = io.StringIO(), io.StringIO()
    ticks = count()
    progress = TerminalProgress(
        ("bgp", "l2"), ("v4",), messages=messages, screen=screen, clock=lambda: next(ticks)
    )
    progress("lab: namespaces up")
    progress("bgp v4 created")
    progress("l2  v4 created")
    progress.finish()
    assert messages.getvalue().splitlines() == [
        "[   1.0s] lab: namespaces up",
        "[   2.0s] bgp v4 created",
        "[   3.0s] l2  v4 created",
    ]
    drawn = [part for part in screen.getvalue().split(CLEAR_LINE) if part]
    assert drawn == [
        status_line(0, 2, None, 1.0),
        status_line(0, 2, ("bgp", "v4"), 2.0),
        status_line(1, 2, ("l2", "v4"), 3.0),
    ]
    assert screen.getvalue().endswith(CLEAR_LINE)  # removed before the report
    assert "1/2 done · now: l2 v4 · 3 s" in drawn[-1]


def test_without_a_terminal_only_the_messages_are_written() -> None:
    messages = io.StringIO()
    progress = TerminalProgress(
        ("bgp",), ("v4",), messages=messages, screen=None, clock=lambda: 0.0
    )
    progress("bgp v4 created")
    progress.finish()
    assert messages.getvalue() == "[   0.0s] bgp v4 created\n"
