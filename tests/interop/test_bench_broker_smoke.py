"""The broker benchmark still runs end to end against the embedded broker, plain and partitioned (tiny count,
two rounds; the figures are not judged here, only that every phase of every round moved every message)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_broker_benchmark_moves_every_message_through_the_embedded_broker() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "interop/bench_broker.py",
            "--brokers",
            "servicebus,servicebus-partitioned",
            "--count",
            "200",
            "--producers",
            "2",
            "--consumers",
            "2",
            "--rounds",
            "2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, out[-2000:] + result.stderr[-2000:]
    for name in ("servicebus", "servicebus-partitioned"):
        row = re.search(rf"^{name}\s+([\d,]+)\s+([\d.]+)\s+([\d,]+)\s+([\d.]+)\s+([\d,]+)\s+([\d.]+)\s*$", out, re.M)
        assert row is not None, out
        rates = [int(row.group(i).replace(",", "")) for i in (1, 3, 5)]
        assert all(rate > 0 for rate in rates), out
        # every round measured every broker, and the table is their median
        assert len(re.findall(rf"^  round [12]  {name}\s", out, re.M)) == 2, out
    assert "(median of 2 round(s);" in out, out
