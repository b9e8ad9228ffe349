"""Bad rows are found before any row of their Arrow batch is sent, and named (fast tier:
pyarrow, no Spark)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker import Broker
from amqplink.spark.checks import check_arrow
from amqplink.spark.columns import BadRowError, IdScheme, messages
from amqplink.spark.options import parse_options
from amqplink.spark.writer import send_partition
from tests import profiles
from tests.conftest import broker_thread
from tests.spark.conftest import drain, new_queue

SCHEME = IdScheme("position", "w", 3)


def _batch(**columns: list[Any]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(columns)


def _bad(batch: pa.RecordBatch, first_row: int = 0, limits: dict[str, int] | None = None) -> BadRowError:
    with pytest.raises(BadRowError) as failed:
        check_arrow(batch, SCHEME, first_row, "q", limits or {"q": 1 << 20})
    return failed.value


@pytest.mark.parametrize(
    ("columns", "row", "column", "says"),
    [
        ({"body": [b"a", None, b"c"]}, 1, "body", "is null"),
        ({"body": [b"a", b"b"], "message_id": ["m", "x" * 129]}, 1, "message_id", "129 characters long"),
        ({"body": [b"a"], "session_id": ["s"], "partition_key": ["k"]}, 0, "partition_key", "but session_id is 's'"),
        ({"body": [b"a", b"b"], "time_to_live": [5, -1]}, 1, "time_to_live", "must be more than 0"),
        ({"body": [b"a", b"b" * 5000]}, 1, "body", "q takes at most 4096"),
        ({"body": [b"a", b"b"], "subject": ["s", "t" * 5000]}, 1, "body", "at least 5009 bytes"),
    ],
)
def test_the_first_bad_row_is_named_with_its_position_id_and_column(
    columns: dict[str, list[Any]], row: int, column: str, says: str
) -> None:
    bad = _bad(_batch(**columns), first_row=1000, limits={"q": 4096})
    assert (bad.partition, bad.row, bad.column) == (3, 1000 + row, column)
    given_id = columns.get("message_id", [None] * 9)[row]
    assert bad.message_id == (given_id if given_id is not None else f"w:3:{1000 + row}")
    text = str(bad)
    assert says in text and f"row {1000 + row} of partition 3" in text and f"column {column!r}" in text
    assert "retrying will not help" in text and "retries" not in text


def test_a_row_without_an_entity_is_bad_only_without_the_option() -> None:
    batch = _batch(body=[b"a", b"b"], entity=["e", None])
    check_arrow(batch, SCHEME, 0, "q", {"e": 100, "q": 100})
    with pytest.raises(BadRowError, match="column 'entity' is null"):
        check_arrow(batch, SCHEME, 0, None, {"e": 100})


def test_each_entity_has_its_own_size_limit() -> None:
    batch = _batch(body=[b"x" * 500, b"y" * 500], entity=["big", "small"])
    check_arrow(batch, SCHEME, 0, None, {"big": 1000, "small": 1000})
    assert _bad_for(batch, {"big": 1000, "small": 100}).row == 1
    assert _bad_for(batch, {"big": 100, "small": 1000}).row == 0


def _bad_for(batch: pa.RecordBatch, limits: dict[str, int]) -> BadRowError:
    with pytest.raises(BadRowError) as failed:
        check_arrow(batch, SCHEME, 0, None, limits)
    return failed.value


def test_the_bad_row_pickles_with_everything_it_names() -> None:
    import pickle

    bad = BadRowError(2, 17, "w:2:17", "body", "is null")
    copy = pickle.loads(pickle.dumps(bad))
    assert str(copy) == str(bad) and (copy.partition, copy.row, copy.message_id) == (2, 17, "w:2:17")


_rows = st.lists(
    st.fixed_dictionaries(
        {
            "body": st.one_of(st.none(), st.binary(max_size=4)),
            "session_id": st.one_of(st.none(), st.sampled_from(["s", "t"])),
            "partition_key": st.one_of(st.none(), st.sampled_from(["s", "k"])),
            "message_id": st.one_of(st.none(), st.sampled_from(["m", "x" * 129])),
            "time_to_live": st.one_of(st.none(), st.integers(-2, 2)),
        }
    ),
    min_size=1,
    max_size=12,
)


@given(_rows)
def test_the_batch_check_finds_the_row_the_row_by_row_encoder_would(rows: list[dict[str, Any]]) -> None:
    """The vectorized check and the encoder agree on the first bad row and its column."""
    columns = {name: [row[name] for row in rows] for name in rows[0]}
    batch = pa.RecordBatch.from_pydict(columns, schema=pa.schema(
        [("body", pa.binary()), ("session_id", pa.string()), ("partition_key", pa.string()),
         ("message_id", pa.string()), ("time_to_live", pa.int64())]))  # fmt: skip
    try:
        list(messages(columns, SCHEME, 0))
        expected = None
    except BadRowError as bad:
        expected = (bad.row, bad.column, bad.message_id)
    try:
        check_arrow(batch, SCHEME, 0, "q", {"q": 1 << 20})
        found = None
    except BadRowError as bad:
        found = (bad.row, bad.column, bad.message_id)
    if expected is None or found is None:
        assert expected == found
    else:  # the same row; a row bad twice over may be named by either of its columns
        assert found[0] == expected[0] and found[2] == expected[2]


@pytest.fixture(scope="module")
def sb() -> Any:
    with broker_thread(Broker(servicebus=True)) as broker:
        yield broker


@settings(profiles.HEAVY, deadline=None)
@given(st.integers(0, 2999))
def test_no_row_of_the_batch_holding_a_bad_row_is_sent(sb: Broker, bad_at: int) -> None:
    """Three Arrow batches of 1,000 rows; a null body at ``bad_at``: the batches before its
    batch are sent whole, nothing of its batch or after."""
    queue = new_queue(sb)
    config = parse_options({"connectionString": sb.connection_string, "entity": queue})
    bodies: list[bytes | None] = [str(i).encode() for i in range(3000)]
    bodies[bad_at] = None
    batches = [_batch(body=bodies[start : start + 1000]) for start in range(0, 3000, 1000)]
    stats = send_partition(config, batches, SCHEME, keep_bad_row=True)
    assert stats.bad_row is not None and stats.bad_row.row == bad_at
    sent = bad_at // 1000 * 1000
    assert stats.rows == sent
    assert sorted(int(str(m)) for m in drain(sb, queue, idle=0.5)) == list(range(sent))
    with pytest.raises(BadRowError, match=f"row {bad_at} of partition 3"):
        send_partition(config, batches, SCHEME)
