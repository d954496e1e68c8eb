"""teapot_lb.metrics_table: a component's metrics declared one line each under its prefix."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest

from teapot_lb.metrics_table import MetricTable, Reading, ReadingCollector


def test_a_table_declares_instruments_under_its_prefix_in_a_registry_of_its_own() -> None:
    t = MetricTable("teapot_lb_demo")
    t.counter("requests", "Requests, by verdict.", ["verdict"]).labels("ok").inc(2)
    t.gauge("leader", "1 while leading.").set(1)
    t.histogram("step_seconds", "Step time.", buckets=(0.1, 1)).observe(0.5)
    text = generate_latest(t.registry).decode()
    assert "# HELP teapot_lb_demo_requests_total Requests, by verdict." in text
    assert 'teapot_lb_demo_requests_total{verdict="ok"} 2.0' in text
    assert "teapot_lb_demo_leader 1.0" in text
    assert 'teapot_lb_demo_step_seconds_bucket{le="1.0"} 1.0' in text
    # Another table of the same prefix does not collide: its own registry.
    MetricTable("teapot_lb_demo").gauge("leader", "1 while leading.")


def test_a_table_can_declare_into_a_given_registry() -> None:
    registry = CollectorRegistry()
    MetricTable("teapot_lb_a", registry).gauge("x", "X.")
    MetricTable("teapot_lb_b", registry).gauge("x", "X.")
    text = generate_latest(registry).decode()
    assert "teapot_lb_a_x 0.0" in text and "teapot_lb_b_x 0.0" in text


@dataclass
class Source:
    done: int = 0
    queued: int = 0


def test_readings_are_read_from_the_source_at_each_scrape() -> None:
    source = Source()
    registry = CollectorRegistry()
    registry.register(
        ReadingCollector(
            "teapot_lb_demo",
            source,
            [
                Reading("counter", "done", "Jobs done.", lambda s: s.done),
                Reading("gauge", "queued", "Jobs waiting.", lambda s: s.queued),
            ],
        )
    )
    source.done, source.queued = 3, 7
    text = generate_latest(registry).decode()
    assert "# TYPE teapot_lb_demo_done_total counter" in text
    assert "teapot_lb_demo_done_total 3.0" in text
    assert "# HELP teapot_lb_demo_queued Jobs waiting." in text
    assert "teapot_lb_demo_queued 7.0" in text
    source.queued = 1
    assert "teapot_lb_demo_queued 1.0" in generate_latest(registry).decode()
