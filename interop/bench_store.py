"""Benchmark (not a test) of the broker's durable store, in two parts.

1. The write path alone: per batch of N 1 KiB messages stored then (next batch)
   deleted, one transaction (SQLite, WAL, ``synchronous=FULL`` and ``NORMAL``: the
   store's design before) or one framed batch appended to the broker's journal
   (``amqplink.broker.durable.journal``, records packed as the broker packs them, one
   ``O_DSYNC`` write per batch), in msg/s and CPU microseconds per message.
2. The broker end to end: ``amqplink broker`` in a subprocess, in memory and with
   ``--data-dir``; amqplink's client sends 1 KiB messages unsettled (each waits for
   its ``accepted``), then receives them peek-lock and completes each one.

    python3 interop/bench_store.py [--count 20000] [--batch 1000] [--runs 2] [--skip-micro]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqplink.broker.durable.journal import Journal  # noqa: E402
from amqplink.broker.durable.records import K_MESSAGE, MESSAGE, delete_record  # noqa: E402
from interop.bench_client import amqplink_receive, amqplink_send  # noqa: E402


def sqlite_rate(directory: str, count: int, batch: int, synchronous: str) -> tuple[float, float]:
    db = sqlite3.connect(os.path.join(directory, f"bench-{synchronous}.sqlite3"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.execute("CREATE TABLE m(key INTEGER PRIMARY KEY, state INTEGER, payload BLOB)")
    body = bytes(1024)
    start, cpu = time.perf_counter(), time.process_time()
    previous: list[tuple[int]] = []
    for first in range(0, count, batch):
        keys = range(first, min(count, first + batch))
        db.execute("BEGIN")
        db.executemany("INSERT INTO m VALUES (?, 0, ?)", [(k, body) for k in keys])
        db.executemany("DELETE FROM m WHERE key = ?", previous)
        db.execute("COMMIT")
        previous = [(k,) for k in keys]
    rate, cpu = count / (time.perf_counter() - start), (time.process_time() - cpu) / count * 1e6
    db.close()
    return rate, cpu


def journal_rate(directory: str, count: int, batch: int) -> tuple[float, float]:
    journal = Journal(os.path.join(directory, "journal"))
    body = bytes(1024)
    start, cpu = time.perf_counter(), time.process_time()
    previous: list[bytes] = []
    for first in range(0, count, batch):
        records: list[bytes] = []
        for k in range(first, min(count, first + batch)):
            records.append(MESSAGE.pack(K_MESSAGE, 1, k, 0, 0, 0, 1.0, math.inf, math.nan, len(body)))
            records.append(body)
        journal.append(records + previous)
        previous = [delete_record(1, k) for k in range(first, min(count, first + batch))]
    rate, cpu = count / (time.perf_counter() - start), (time.process_time() - cpu) / count * 1e6
    journal.close()
    return rate, cpu


def broker_rates(count: int, data_dir: str | None) -> tuple[float, float]:
    args = [sys.executable, "-m", "amqplink.cli", "broker", "--port", "0"]
    if data_dir is not None:
        args += ["--data-dir", data_dir]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        found = re.search(r"amqp://127\.0\.0\.1:\d+", proc.stdout.readline())
        assert found is not None, "the broker did not start"
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        sent = amqplink_send(found.group(0), queue, count, 1024, settled=False)
        received = amqplink_receive(found.group(0), queue, count, 1024)
        return sent, received
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--skip-micro", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        if not args.skip_micro:
            print(f"write path, {args.count} x 1 KiB stored, then deleted (msg/s, CPU us/msg):")
            for batch in (100, args.batch):
                full = sqlite_rate(directory, args.count, batch, "FULL")
                normal = sqlite_rate(directory, args.count, batch, "NORMAL")
                journal = journal_rate(directory, args.count, batch)
                for f in Path(directory).iterdir():
                    shutil.rmtree(f) if f.is_dir() else f.unlink()
                cells = [f"{name} {rate:9,.0f} {cpu:5.1f}" for name, (rate, cpu) in
                         (("sqlite FULL", full), ("sqlite NORMAL", normal), ("journal", journal))]  # fmt: skip
                print(f"  batch {batch:5}: " + "   ".join(cells))
        print(f"broker, amqplink client, {args.count} x 1 KiB (msg/s, best of {args.runs} alternating runs):")
        runs: dict[str, list[tuple[float, float]]] = {"memory": [], "durable": []}
        for run in range(args.runs):  # alternating, so that a busy moment of the machine hits both
            runs["memory"].append(broker_rates(args.count, None))
            runs["durable"].append(broker_rates(args.count, os.path.join(directory, f"data{run}")))
        memory = (max(r[0] for r in runs["memory"]), max(r[1] for r in runs["memory"]))
        durable = (max(r[0] for r in runs["durable"]), max(r[1] for r in runs["durable"]))
        print(f"  {'':10} {'send unsettled':>15} {'receive+complete':>17}")
        print(f"  {'memory':10} {memory[0]:15,.0f} {memory[1]:17,.0f}")
        print(f"  {'--data-dir':10} {durable[0]:15,.0f} {durable[1]:17,.0f}")
        print(f"  {'ratio':10} {durable[0] / memory[0]:15.2f} {durable[1] / memory[1]:17.2f}")


if __name__ == "__main__":
    main()
