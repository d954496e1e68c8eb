"""A component's Prometheus metrics, declared one line each under the component's prefix.

Two shapes, one table style:

* :class:`MetricTable` — instruments the component updates as it works (counters,
  gauges, histograms), in a registry of their own so several components can live in one
  test process;
* :class:`Reading` rows and :class:`ReadingCollector` — numbers read from the component's
  own state at scrape time (one unlabelled sample each).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

S = TypeVar("S")


class MetricTable:
    """Declares instruments named ``<prefix>_<name>`` in ``registry`` (a new one if None)."""

    def __init__(self, prefix: str, registry: CollectorRegistry | None = None) -> None:
        self.prefix = prefix
        self.registry = registry or CollectorRegistry()

    def counter(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(self._name(name), help_text, labels, registry=self.registry)

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Gauge:
        return Gauge(self._name(name), help_text, labels, registry=self.registry)

    def histogram(
        self, name: str, help_text: str, labels: Sequence[str] = (), *, buckets: Sequence[float]
    ) -> Histogram:
        return Histogram(
            self._name(name), help_text, labels, buckets=buckets, registry=self.registry
        )

    def _name(self, name: str) -> str:
        return f"{self.prefix}_{name}"


@dataclass(frozen=True)
class Reading(Generic[S]):
    """One number of a source ``S``, read at scrape time: a counter or a gauge."""

    kind: Literal["counter", "gauge"]
    name: str  # after the prefix
    help_text: str
    read: Callable[[S], float]


class ReadingCollector(Collector, Generic[S]):
    """Yields each reading of ``source`` as a metric family ``<prefix>_<name>``."""

    def __init__(self, prefix: str, source: S, readings: Sequence[Reading[S]]) -> None:
        self.prefix = prefix
        self.source = source
        self.readings = tuple(readings)

    def collect(self) -> Iterator[Metric]:
        for r in self.readings:
            name, value = f"{self.prefix}_{r.name}", r.read(self.source)
            if r.kind == "counter":
                yield CounterMetricFamily(name, r.help_text, value=value)
            else:
                yield GaugeMetricFamily(name, r.help_text, value=value)
