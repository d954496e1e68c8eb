"""The lab's progress on a terminal: its messages scroll above a status line that says
which mode and family runs, how many are done and for how long the lab has been running.

The status line is drawn on stdout only when it is a terminal (the report table goes
there too, after the run); the messages go to stderr as without it. The phase comes from
the scenarios' messages, which start with the mode and family
(:meth:`teapot_lb.lab.scenarios.ModeScenario.say`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol


class Stream(Protocol):
    """Where progress goes: a text file, or the lab CLI's output that never raises."""

    def write(self, text: str, /) -> object: ...

    def flush(self) -> object: ...


CLEAR_LINE = "\r\x1b[2K"
BAR = 20


def phase_of(text: str, modes: Sequence[str], families: Sequence[str]) -> tuple[str, str] | None:
    """(mode, family) a scenario's message is about, or None for the lab's own messages."""
    words = text.split(None, 2)
    if len(words) >= 2 and words[0] in modes and words[1] in families:
        return words[0], words[1]
    return None


def status_line(done: int, total: int, phase: tuple[str, str] | None, elapsed: float) -> str:
    filled = BAR * done // total if total else BAR
    bar = "█" * filled + "░" * (BAR - filled)
    where = f"{phase[0]} {phase[1]}" if phase else "setting up"
    return f"[{bar}] {done}/{total} done · now: {where} · {elapsed:.0f} s"


class TerminalProgress:
    """A progress callback for :func:`teapot_lb.lab.runner.run_lab`."""

    def __init__(
        self,
        modes: Sequence[str],
        families: Sequence[str],
        *,
        messages: Stream,
        screen: Stream | None,
        clock: Callable[[], float],
    ) -> None:
        self.modes, self.families = tuple(modes), tuple(families)
        self.order = [(m, f) for m in self.modes for f in self.families]
        self.messages = messages
        self.screen = screen  # None: no status line (not a terminal)
        self.clock = clock
        self.start = clock()
        self.phase: tuple[str, str] | None = None

    def done(self) -> int:
        return self.order.index(self.phase) if self.phase in self.order else 0

    def __call__(self, text: str) -> None:
        phase = phase_of(text, self.modes, self.families)
        if phase is not None:
            self.phase = phase
        elapsed = self.clock() - self.start
        if self.screen is not None:
            self.screen.write(CLEAR_LINE)
            self.screen.flush()
        self.messages.write(f"[{elapsed:6.1f}s] {text}\n")
        self.messages.flush()
        if self.screen is not None:
            self.screen.write(status_line(self.done(), len(self.order), self.phase, elapsed))
            self.screen.flush()

    def finish(self) -> None:
        """Remove the status line (the report follows)."""
        if self.screen is not None:
            self.screen.write(CLEAR_LINE)
            self.screen.flush()
