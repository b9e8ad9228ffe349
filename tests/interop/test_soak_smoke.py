"""``interop/soak_broker.py`` runs: a few seconds, a few idle sockets, and it reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_soak_script_runs_briefly_and_reports_the_broker_s_memory() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "interop" / "soak_broker.py"), "--seconds", "3", "--idle", "20",
         "--interval", "1", "--handshake-timeout", "1"],
        capture_output=True, text=True, timeout=90, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line[:1] == " " and line.split()[0].isdigit()]
    assert len(rows) >= 2
    rss = [float(row[1]) for row in rows]
    assert all(0 < value < 1024 for value in rss)
    last = rows[-1]
    sent, accepted, read_mib, reconnects = int(last[2]), int(last[3]), float(last[5]), int(last[7])
    assert sent > 0 and accepted > 0 and read_mib > 0
    assert reconnects > 0  # the broker dropped silent sockets at its 1 s handshake deadline
    assert "peak broker RSS" in result.stdout
