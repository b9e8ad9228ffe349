"""The id window (Deduplicator) against a reference model, with an injected clock."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqplink.servicebus.replication import Deduplicator


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Model:
    """What a Deduplicator must answer: first sightings in order; remembered = the last
    ``max_count`` of them whose window has not ended."""

    def __init__(self, max_count: int, window: float) -> None:
        self.max_count, self.window = max_count, window
        self.records: list[tuple[str, float]] = []

    def remembered(self, now: float) -> set[str]:
        return {i for i, at in self.records[-self.max_count :] if now - at < self.window}

    def seen(self, message_id: str, now: float) -> bool:
        live = self.remembered(now)
        if message_id in live:
            return True
        self.records = [(i, at) for i, at in self.records if i in live]
        self.records.append((message_id, now))
        return False

    def forget(self, message_id: str, now: float) -> bool:
        live = self.remembered(now)
        self.records = [(i, at) for i, at in self.records if i in live and i != message_id]
        return message_id in live


IDS = st.sampled_from([f"m{i}" for i in range(12)])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("seen"), IDS, st.floats(min_value=0, max_value=4)),
        st.tuples(st.just("forget"), IDS, st.just(0.0)),
        st.tuples(st.just("seen_many"), st.lists(IDS, max_size=8), st.floats(min_value=0, max_value=4)),
        st.tuples(st.just("reopen"), st.just(""), st.just(0.0)),
    ),
    max_size=80,
)


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(*) FROM seen").fetchone()[0])


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_count=st.integers(1, 6), window=st.floats(0.5, 10), ops=OPS, durable=st.booleans())
def test_answers_match_the_model_and_bounds_hold(
    tmp_path: Path, max_count: int, window: float, ops: list[tuple[str, Any, float]], durable: bool
) -> None:
    path = tmp_path / f"dedup-{id(ops)}.sqlite"
    path.unlink(missing_ok=True)
    clock, model = Clock(), Model(max_count, window)

    def open_() -> Deduplicator:
        return Deduplicator(max_count, window, path=path if durable else None, clock=clock)

    dedup = open_()
    duplicates = 0
    for op, message_id, advance in ops:
        clock.now += advance
        if op == "seen":
            expected = model.seen(message_id, clock.now)
            assert dedup.seen(message_id) is expected
            duplicates += expected
            assert dedup.duplicates_removed == duplicates
        elif op == "seen_many":  # one clock reading, one transaction: the same answers as one by one
            expected_many = [model.seen(i, clock.now) for i in message_id]
            assert dedup.seen_many(message_id) == expected_many
            duplicates += sum(expected_many)
            assert dedup.duplicates_removed == duplicates
        elif op == "forget":
            assert dedup.forget(message_id) is model.forget(message_id, clock.now)
        elif durable:  # a restarted consumer on the same file sees the same list
            dedup.close()
            dedup = open_()
            duplicates = 0
        remembered = model.remembered(clock.now)
        assert len(dedup) == len(remembered) <= max_count
        assert all(i in dedup for i in remembered)
        if durable:  # the file holds what memory does: expired and evicted ids deleted
            assert _rows(path) == len(remembered)
    dedup.close()


@given(gap=st.floats(0, 99.99), window=st.just(100.0))
def test_an_id_seen_within_the_window_is_a_duplicate(gap: float, window: float) -> None:
    clock = Clock()
    dedup = Deduplicator(10, window, clock=clock)
    assert dedup.seen("a") is False
    clock.now += gap
    assert dedup.seen("a") is True
    clock.now += window - gap  # exactly one window after the first sighting: forgotten
    assert dedup.seen("a") is False
    assert dedup.counters.expired == 1 and dedup.counters.unique == 2


def test_count_bound_evicts_the_oldest_and_says_so() -> None:
    dedup = Deduplicator(3, dt.timedelta(minutes=1), clock=Clock())
    for i in range(5):
        assert dedup.seen(f"m{i}") is False
    assert len(dedup) == 3 and "m0" not in dedup and "m1" not in dedup and "m4" in dedup
    assert dedup.counters.evicted == 2


def test_clock_stepping_back_does_not_reorder(tmp_path: Path) -> None:
    clock = Clock()
    dedup = Deduplicator(10, 5.0, clock=clock, path=tmp_path / "d.sqlite")
    dedup.seen("a")
    clock.now -= 100  # wall clock stepped back: "b" is not older than "a"
    dedup.seen("b")
    clock.now += 104.9
    assert "a" in dedup and "b" in dedup
    clock.now += 0.1
    assert "a" not in dedup and "b" not in dedup
    dedup.close()


def test_reopen_with_a_smaller_max_count_prunes_the_file(tmp_path: Path) -> None:
    path, clock = tmp_path / "d.sqlite", Clock()
    with Deduplicator(10, 60, path=path, clock=clock) as dedup:
        for i in range(8):
            dedup.seen(f"m{i}")
    with Deduplicator(3, 60, path=path, clock=clock) as dedup:
        assert len(dedup) == 3 and _rows(path) == 3
        assert dedup.seen("m7") is True and dedup.seen("m4") is False
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("bad", [{"max_count": 0}, {"max_count": 1.5}, {"window": 0}, {"window": dt.timedelta(0)}])
def test_bad_bounds_are_refused(bad: dict[str, object]) -> None:
    args: dict[str, object] = {"max_count": 5, "window": 1.0} | bad
    with pytest.raises(ValueError, match="Deduplicator"):
        Deduplicator(**args)  # type: ignore[arg-type]


def test_bad_ids_and_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="non-empty strings"):
        Deduplicator().seen("")
    not_sqlite = tmp_path / "x.sqlite"
    not_sqlite.write_bytes(b"this is not a database file at all" * 10)
    with pytest.raises(OSError, match=r"x\.sqlite"):
        Deduplicator(path=not_sqlite)
