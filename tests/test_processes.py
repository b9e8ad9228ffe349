"""tests/processes.py's bookkeeping, which the leftover-process check of tests/conftest.py uses."""

from __future__ import annotations

import subprocess

from tests import processes


def test_a_child_counts_as_started_since_only_if_it_started_at_or_after_the_mark() -> None:
    older = subprocess.Popen(["sleep", "30"])
    try:
        while not processes.now_ticks() > processes.started_ticks(older.pid) + 1:
            subprocess.run(["true"], check=True)  # (a tick passes: 10 ms; no sleep needed)
        mark = processes.now_ticks()
        newer = subprocess.Popen(["sleep", "30"])
        try:
            both = frozenset({older.pid, newer.pid})
            assert both <= processes.children()
            assert processes.started_since(both, mark) == {newer.pid}
        finally:
            processes.kill(newer)
    finally:
        processes.kill(older)
