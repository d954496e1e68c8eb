"""inotify records: parsing `struct inotify_event` runs and what each means for the manifests."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.standalone.inotify import Effect, InotifyEvent, Mask, effect, parse_events

PARENT, ROOT, SUB = 1, 2, 3


def record(wd: int, mask: int, name: str = "", cookie: int = 0, pad: int = 0) -> bytes:
    """One record as the kernel writes it: the name NUL-terminated and padded."""
    raw = name.encode() + b"\0" * (pad or (16 - len(name) % 16 if name else 0))
    return struct.pack("=iIII", wd, mask, cookie, len(raw)) + raw


def ev(mask: Mask, name: str = "", wd: int = ROOT) -> InotifyEvent:
    return InotifyEvent(wd, mask, 0, name)


def meaning(event: InotifyEvent) -> Effect:
    return effect(event, parent_wd=PARENT, root_name="manifests")


def test_a_run_of_records_parses_to_events_in_order() -> None:
    data = record(ROOT, Mask.MOVED_TO, "web.yaml", cookie=7) + record(ROOT, Mask.DELETE_SELF)
    events, rest = parse_events(data)
    assert events == [
        InotifyEvent(ROOT, Mask.MOVED_TO, 7, "web.yaml"),
        InotifyEvent(ROOT, Mask.DELETE_SELF, 0, ""),
    ]
    assert rest == b""


def test_an_overflow_record_has_wd_minus_one_and_no_name() -> None:
    events, _ = parse_events(record(-1, Mask.Q_OVERFLOW))
    assert events == [InotifyEvent(-1, Mask.Q_OVERFLOW, 0, "")]


@pytest.mark.parametrize("cut", [1, 15, 16, 17, 31])
def test_an_incomplete_last_record_is_kept_for_the_next_read(cut: int) -> None:
    first, second = record(ROOT, Mask.CLOSE_WRITE, "a.yaml"), record(SUB, Mask.DELETE, "b.yaml")
    data = first + second
    events, rest = parse_events(data[: len(first) + cut])
    assert [e.name for e in events] == ["a.yaml"]
    assert rest == second[:cut]
    more, rest = parse_events(rest + second[cut:])
    assert [(e.wd, e.name) for e in more] == [(SUB, "b.yaml")] and rest == b""


def test_a_name_padded_with_many_nuls_is_cut_at_the_first() -> None:
    events, _ = parse_events(record(ROOT, Mask.CLOSE_WRITE, "x.yaml", pad=32))
    assert events[0].name == "x.yaml"


@given(
    st.lists(
        st.tuples(
            st.integers(-1, 2**31 - 1),
            st.sampled_from(list(Mask)),
            st.integers(0, 2**32 - 1),
            st.text(st.characters(blacklist_characters="\0", codec="utf-8"), max_size=40),
        ),
        max_size=8,
    ),
    st.integers(0, 400),
)
def test_any_run_cut_anywhere_parses_to_the_same_events(
    specs: list[tuple[int, Mask, int, str]], cut: int
) -> None:
    data = b"".join(record(wd, mask, name, cookie) for wd, mask, cookie, name in specs)
    cut = min(cut, len(data))
    head, rest = parse_events(data[:cut])
    tail, rest = parse_events(rest + data[cut:])
    assert rest == b""
    assert [(e.wd, e.mask, e.cookie, e.name) for e in head + tail] == specs


# --- what an event means ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mask", "name"),
    [
        (Mask.MOVED_TO, "web.yaml"),  # written to a temporary file, renamed in
        (Mask.CLOSE_WRITE, "web.yaml"),  # written in place, now complete
        (Mask.DELETE, "web.yaml"),
        (Mask.MOVED_FROM, "web.yaml"),
        (Mask.ATTRIB, "web.yaml"),  # touch
        (Mask.DELETE | Mask.ISDIR, "team-a"),  # a subdirectory went
    ],
)
def test_changes_to_manifest_files_reload(mask: Mask, name: str) -> None:
    assert meaning(ev(mask, name)) is Effect.RELOAD
    assert meaning(ev(mask, name, wd=SUB)) is Effect.RELOAD


def test_a_hidden_link_renamed_in_reloads_as_a_configmap_volume_publishes_an_update() -> None:
    assert meaning(ev(Mask.MOVED_TO, "..data")) is Effect.RELOAD
    assert meaning(ev(Mask.MOVED_TO | Mask.ISDIR, ".state")) is Effect.NONE


def test_a_file_only_created_is_not_read_until_it_is_closed_or_renamed_in() -> None:
    assert meaning(ev(Mask.CREATE, "web.yaml")) is Effect.NONE


@pytest.mark.parametrize("mask", [Mask.CREATE, Mask.CLOSE_WRITE, Mask.MOVED_FROM, Mask.DELETE])
def test_hidden_files_are_ignored(mask: Mask) -> None:
    assert meaning(ev(mask, ".web.yaml.tmp")) is Effect.NONE
    assert meaning(ev(mask | Mask.ISDIR, ".state")) is Effect.NONE


@pytest.mark.parametrize(
    "event",
    [
        ev(Mask.CREATE | Mask.ISDIR, "team-a"),  # a new subdirectory: watch it
        ev(Mask.MOVED_TO | Mask.ISDIR, "team-a"),
        ev(Mask.DELETE_SELF),  # the manifest directory went
        ev(Mask.MOVE_SELF),
        ev(Mask.IGNORED),  # a watch was dropped
        ev(Mask.Q_OVERFLOW, wd=-1),  # events were lost
        ev(Mask.CREATE | Mask.ISDIR, "manifests", wd=PARENT),  # the manifests came back
        ev(Mask.MOVED_TO | Mask.ISDIR, "manifests", wd=PARENT),  # replaced by a rename
    ],
)
def test_events_that_leave_watches_stale_rescan(event: InotifyEvent) -> None:
    assert meaning(event) is Effect.RESCAN


def test_the_parents_other_entries_are_ignored() -> None:
    assert meaning(ev(Mask.CLOSE_WRITE, "notes.txt", wd=PARENT)) is Effect.NONE
    assert meaning(ev(Mask.CREATE | Mask.ISDIR, "other", wd=PARENT)) is Effect.NONE


def test_a_single_manifest_file_written_in_place_reloads() -> None:
    assert meaning(ev(Mask.CLOSE_WRITE, "manifests", wd=PARENT)) is Effect.RELOAD
