"""The benchmark scripts still run end to end (tiny counts; the figures are not judged here).

The figures themselves come from running the scripts by hand with their defaults;
these tests only keep the scripts from rotting: each must finish, print a row for
every client and scenario, and report positive rates. The client benchmark builds
and starts Debian's proton C example broker (the ``proton-c`` peer of tests/peers.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RATE = r"([\d,]+) msg/s"


def _run(*args: str) -> str:
    result = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout


@pytest.mark.peer("proton-c")
@pytest.mark.peer("proton")
def test_client_benchmark_prints_every_scenario_for_amqplink_and_proton() -> None:
    out = _run(
        "interop/bench_client.py", "--count", "300", "--sizes", "64", "--clients", "amqplink,proton", "--repeat", "2"
    )
    assert out.count("(run 2/2)") == 6 and "medians of 2 runs" in out
    for scenario in ("unsettled send", "pre-settled send", "peek-lock receive+accept"):
        for client in ("amqplink", "proton"):
            match = re.search(rf"{re.escape(scenario)}\s+64 B\s+{client}\s+{RATE}", out)
            assert match is not None, f"no {scenario} row for {client}:\n{out}"
            assert int(match.group(1).replace(",", "")) > 0
    assert re.search(r"peek-lock receive\+accept\s+64B\s+[\d,]+\s+[\d,]+\s+[\d.]+x proton", out), out


@pytest.mark.peer("proton-c")
def test_client_benchmark_memory_run_reports_a_bounded_in_flight_count() -> None:
    out = _run("interop/bench_client.py", "--memory", "--memory-count", "20000")
    rows = re.findall(r"^\s*([\d,]+)\s+(\d+)\s+([\d.]+)\s+([\d,]+)$", out, re.MULTILINE)
    assert len(rows) == 10, out
    assert rows[-1][0] == "20,000"
    assert all(int(in_flight) <= 1000 for _, in_flight, _, _ in rows)


@pytest.mark.peer("proton")
def test_codec_benchmark_compares_with_proton() -> None:
    out = _run("interop/bench_codec.py", "--count", "200", "--rounds", "1")
    assert re.search(r"^amqplink\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+", out, re.MULTILINE), out
    assert re.search(r"^proton \(C\)\s+\d+.*x (faster|slower)", out, re.MULTILINE), out


def test_replication_outage_benchmark_prints_the_three_rows() -> None:
    out = _run("interop/bench_replication_outage.py", "--seconds", "1", "--tasks", "2")
    for row in ("both namespaces up", "no breaker (break_for=0)", "circuit breaker"):
        match = re.search(rf"{re.escape(row)}\s+([\d,.]+)\s+[\d.]+x", out)
        assert match is not None, out
    assert "breaker / no breaker" in out


@pytest.mark.peer("proton")
def test_transaction_benchmark_prints_both_modes_of_every_client_and_scenario() -> None:
    out = _run(
        "interop/bench_transactions.py",
        *("--count", "200", "--per-transaction", "50", "--move-count", "20", "--repeat", "1"),
    )
    for scenario, per in (("send", 50), ("move", 1)):
        for client in ("servicebus", "amqplink", "proton"):
            for mode in ("plain", "transacted"):
                match = re.search(rf"{scenario}\s+{per}/txn\s+{client}\s+{mode}\s+{RATE}", out)
                assert match is not None, f"no {scenario} {mode} row for {client}:\n{out}"
                assert int(match.group(1).replace(",", "")) > 0
            row = rf"^{scenario} {per}/transaction\s+{client}\s+[\d,]+\s+[\d,]+\s+[\d.]+x"
            assert re.search(row, out, re.MULTILINE), out
