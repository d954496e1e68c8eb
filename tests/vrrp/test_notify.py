"""Parsing keepalived's notify FIFO lines."""

from __future__ import annotations

from teapot_lb.vrrp.notify import NotifyParser, Transition, UnparsedLine, VrrpState


def test_lines_split_across_reads_become_transitions() -> None:
    parser = NotifyParser()
    assert parser.feed(b'INSTANCE "eth0-v4-vrid51" MAS') == []
    events = parser.feed(b'TER 254\nINSTANCE "eth0-v4-vrid51" BACKUP 254\n')
    assert events == [
        Transition("INSTANCE", "eth0-v4-vrid51", VrrpState.MASTER, 254),
        Transition("INSTANCE", "eth0-v4-vrid51", VrrpState.BACKUP, 254),
    ]


def test_deleted_without_priority_and_dual_master_marker_parse() -> None:
    parser = NotifyParser()
    deleted, rx_lower = parser.feed(b'INSTANCE "a" DELETED\nINSTANCE "a" MASTER_RX_LOWER_PRI 254\n')
    assert isinstance(deleted, Transition) and deleted.state is VrrpState.DELETED
    assert deleted.priority is None
    assert isinstance(rx_lower, Transition) and not rx_lower.state.is_state


def test_garbage_is_reported_not_raised() -> None:
    events = NotifyParser().feed(b'INSTANCE "a" SLEEPING 3\nhello\nINSTANCE "a" MASTER x\n')
    assert all(isinstance(e, UnparsedLine) for e in events)
    assert len(events) == 3
