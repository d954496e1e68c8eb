"""One logging configuration for every component.

JSON lines when stderr is not a terminal (clusters, CI, the lab's log files),
coloured key=value lines on a terminal. Every component calls :func:`configure`
once at start and gets loggers with :func:`get`.
"""

from __future__ import annotations

import logging
import sys

import structlog
from structlog.typing import FilteringBoundLogger, Processor

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def configure(
    level: str = "info", *, json: bool | None = None, component: str | None = None
) -> None:
    """Configure structlog (and the stdlib root logger it renders through)."""
    if json is None:
        json = not sys.stderr.isatty()
    numeric = _LEVELS.get(level.lower())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(_LEVELS)}")
    processors: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
    ]
    renderer: Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=True)
    )
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr, force=True)
    structlog.contextvars.clear_contextvars()
    if component:
        structlog.contextvars.bind_contextvars(component=component)


Logger = FilteringBoundLogger


def get(name: str) -> Logger:
    """A bound logger carrying ``logger=name`` (event names with fields, never f-strings:
    ``log.get("speaker").info("event", service=key, reason=reason)``)."""
    logger: Logger = structlog.get_logger().bind(logger=name)
    return logger
