"""``stagedReads``: the input partitions that name row ranges of the staged files (what the
executors open and check), the master that ``auto`` decides by, and the errors naming the file
and the option when an executor cannot have the rows that were staged."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.spark.options import SinkOptionError
from amqplink.spark.source_options import parse_source_options
from amqplink.spark.staging import StagedFile, Staging, StagingError, open_staged
from amqplink.spark.stream_reader import local_master, master_of, split_staged, staged_rows

pytestmark = pytest.mark.spark

CONN = "Endpoint=sb://ns.example/;SharedAccessKeyName=k;SharedAccessKey=s"


@given(st.lists(st.integers(0, 40), min_size=1, max_size=5), st.none() | st.integers(1, 12))
def test_the_partitions_cover_every_staged_row_once_in_order(rows: list[int], parts: int | None) -> None:
    files = [StagedFile(f"/s/{i}.arrow", 1, "x", n) for i, n in enumerate(rows)]
    partitions = split_staged(files, parts)
    covered = [(f.path, first + k) for p in partitions for f, first, count in p.slices for k in range(count)]
    assert covered == [(f.path, k) for f in files for k in range(f.rows)]
    if sum(rows):
        assert len(partitions) == min(sum(rows), parts or 1)  # default: one per 10,000 rows
        sizes = [sum(count for _, _, count in p.slices) for p in partitions]
        assert max(sizes) - min(sizes) <= 1


def _staged(tmp_path: Path, count: int = 30) -> tuple[Staging, StagedFile]:
    staging = Staging(tmp_path / "s")
    staging.write(4, pa.RecordBatch.from_pydict({"message_id": [f"id-{i}" for i in range(count)]}))
    return staging, staging.describe(4)


def test_a_task_reads_its_rows_from_the_staged_file(tmp_path: Path) -> None:
    _, staged = _staged(tmp_path)
    parts = split_staged([staged], 3)
    got = [r for p in parts for batch in staged_rows(p) for r in batch.column("message_id").to_pylist()]
    assert got == [f"id-{i}" for i in range(30)]
    # a reader after a restart describes the file from disk: the same length and digest
    assert Staging(tmp_path / "s").describe(4) == staged


@pytest.mark.parametrize("damage", ["missing", "truncated", "changed"])
def test_a_file_that_is_not_the_one_staged_is_an_error_naming_it_and_the_option(
    tmp_path: Path, damage: str
) -> None:
    _, staged = _staged(tmp_path)
    path = Path(staged.path)
    data = path.read_bytes()
    if damage == "missing":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(data[:-8])
    else:
        path.write_bytes(data.replace(b"id-7", b"id-8"))
    with pytest.raises(StagingError, match="stagedReads=inline") as caught:
        open_staged(staged)
    assert staged.path in str(caught.value)


def test_auto_reads_files_on_a_local_master_only() -> None:
    submit = ["java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit"]
    assert master_of([*submit, "--conf", "spark.master=local[2]", "pyspark-shell"]) == "local[2]"
    assert master_of([*submit, "--master", "yarn", "app.py"]) == "yarn"
    assert master_of([*submit, "--master=spark://h:7077", "app.py"]) == "spark://h:7077"
    assert master_of(["python", "--master", "local"]) is None  # not Spark's JVM
    assert [local_master(m) for m in ("local", "local[*]", "local-cluster[2,1,1024]")] == [True] * 3
    assert [local_master(m) for m in (None, "yarn", "spark://h:7077", "k8s://h", "localhost")] == [False] * 5


def test_the_option_takes_three_values() -> None:
    base = {"connectionString": CONN, "entity": "q", "checkpointLocation": "/c"}
    assert parse_source_options(base).staged_reads == "auto"
    assert parse_source_options({**base, "STAGEDREADS": " File "}).staged_reads == "file"
    with pytest.raises(SinkOptionError, match="stagedReads: must be one of auto, file, inline"):
        parse_source_options({**base, "stagedReads": "shared"})
