"""Ctrl-C on a terminal midway through ``amqplink demo``'s write: a clear ending, no stack
traces, nothing left running or on disk.

A terminal's Ctrl-C signals its whole foreground process group. Before, Spark's Python
workers died mid-task with it and the demo stopped the session under the running write:
about 190 lines of Java and Python stack traces in 7 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import processes
from tests.spark.conftest import ROOT

pytestmark = pytest.mark.spark

WRITING = re.compile(r"writing +sent +(\d{1,3}(,\d{3})+)")
"""The progress line once the write has sent a thousand rows or more."""


def _processes_with(marker: str) -> list[int]:
    """The processes whose environment holds ``marker`` (the demo and all it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone, or not ours
            continue
    return found


def _pidfds(pids: list[int]) -> dict[int, int]:
    """``{pidfd: pid}``: a pidfd is readable once its process has ended."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            continue
    return fds


def _read_until(master: int, pattern: re.Pattern[str], seen: str) -> str:
    """What the terminal shows, read until ``pattern`` appears (at most 300 s; the terminal
    closes once the demo has exited)."""
    deadline = time.monotonic() + 300
    while pattern.search(seen) is None:
        left = deadline - time.monotonic()
        chunk = b""
        if left > 0 and select.select([master], [], [], left)[0]:
            with contextlib.suppress(OSError):  # EIO: the demo has exited
                chunk = os.read(master, 65536)
        assert chunk, f"no {pattern.pattern!r}: {seen[-2000:]!r}"
        seen += chunk.decode(errors="replace")
    return seen


@contextlib.contextmanager
def _demo_on_a_terminal(
    *args: str, tmp_path: Path | None = None, marker: str | None = None
) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``amqplink demo ARGS`` with its stderr on a terminal (the ``master`` end is yielded) and
    its stdout a pipe; ``tmp_path``: its TMPDIR; ``marker``: ``NAME=VALUE`` in its environment.
    Killed, with everything it started, if still running at the end."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    if tmp_path is not None:
        env["TMPDIR"] = str(tmp_path)
    if marker is not None:
        name, value = marker.split("=")
        env[name] = value
    env.pop("PYSPARK_PYTHON", None)  # the demo sets it itself
    master, slave = pty.openpty()
    proc = processes.interruptible(
        [sys.executable, "-m", "amqplink.cli", "demo", *args],
        stdout=subprocess.PIPE, stderr=slave, env=env, text=True, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    try:
        yield proc, master
    finally:
        os.close(master)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def _rest(master: int, seen: str) -> str:
    """``seen`` and what the terminal still shows, read until its other end closes."""
    while select.select([master], [], [], 0.5)[0]:
        try:
            seen += os.read(master, 65536).decode(errors="replace")
        except OSError:  # the terminal's other end closed
            break
    return seen


def _ended(
    proc: subprocess.Popen[str], master: int, seen: str, pressed: float, since: re.Pattern[str]
) -> tuple[str, str, float]:
    """The demo's end after Ctrl-C (pressed at ``pressed``): what the terminal showed after
    ``since``, its standard output and the seconds it took; its exit status must be 130."""
    out, _ = proc.communicate(timeout=120)
    took = time.monotonic() - pressed
    seen = _rest(master, seen)
    after = seen[since.search(seen).end() :]  # type: ignore[union-attr]
    assert proc.returncode == 130, after[-3000:]
    return after, out, took


@pytest.mark.parametrize("presses", [1, 2, 3])
def test_ctrl_c_midway_through_the_write_ends_cleanly_and_leaves_nothing_behind(presses: int, tmp_path: Path) -> None:
    """``presses=2``: Ctrl-C again while it stops; it says it is still stopping and finishes
    the stop (a second Ctrl-C cut it short, leaving the data directory and a TLS key, and
    waited for Spark's write to end: 1,000,000 rows). ``presses=3``: it quits at once."""
    marker = f"AMQPLINK_DEMO_TEST={uuid.uuid4().hex}"
    with _demo_on_a_terminal("--rows", "1000000", "--no-outage", tmp_path=tmp_path, marker=marker) as (proc, master):
        seen = _read_until(master, WRITING, "")
        assert [p.name for p in tmp_path.glob("amqplink-*")], "the demo's files are in TMPDIR"
        started = _pidfds(_processes_with(marker))  # the demo, its JVM, Spark's Python workers
        os.killpg(proc.pid, signal.SIGINT)  # as the terminal does: the whole foreground group
        pressed = time.monotonic()
        stopped_first = False  # the stop was over before the second press could land
        if presses >= 2:
            seen = _read_until(master, re.compile("interrupted: stopping Spark"), seen)
            stopped_first = "amqplink demo: interrupted" in seen or proc.poll() is not None
            os.killpg(proc.pid, signal.SIGINT)
        if presses == 3 and not stopped_first:
            # (the stop may end before the second press lands: then no third press is asked for)
            seen = _read_until(master, re.compile("still stopping|amqplink demo: interrupted"), seen)
            if "still stopping" in seen:
                os.killpg(proc.pid, signal.SIGINT)
        after, out, took = _ended(proc, master, seen, pressed, WRITING)
    assert took < 60, f"{took:.1f} s from Ctrl-C to the exit"
    if presses < 3:
        _ended_cleanly(after, out, presses == 2 and not stopped_first, tmp_path)
    _all_gone(started, marker)


def _ended_cleanly(after: str, out: str, pressed_while_stopping: bool, tmp_path: Path) -> None:
    """``pressed_while_stopping``: a second Ctrl-C was sent while the stop was still going on
    (Spark's JVM, sent the same SIGINT, may end so fast that none can, or that the stop is over
    by the time the demo handles it); whatever the timing, the stop is finished, not cut short."""
    assert json.loads(out.strip().splitlines()[-1])["interrupted"] is True
    assert "interrupted: stopping Spark and the namespaces" in after
    still = "still stopping (seconds); Ctrl-C once more quits at once" in after
    # Said only after a second press; a press that lands as the stop ends finds nothing to say.
    assert still <= pressed_while_stopping, after[-3000:]
    assert after.rstrip().endswith("amqplink demo: interrupted"), after[-3000:]
    for noise in ("Traceback", "Exception", " ERROR ", "exited unexpectedly", "never retrieved"):
        assert noise not in after, after[-3000:]
    assert [p.name for p in tmp_path.glob("amqplink-*")] == []  # data directory, certificate and key


def _all_gone(started: dict[int, int], marker: str) -> None:
    """Every process the demo had (``{pidfd: pid}``) ends within 30 s of its exit."""
    assert len(started) >= 3
    gone = time.monotonic() + 30  # the JVM ends once its standard input, the demo's pipe, has closed
    while started and (left := gone - time.monotonic()) > 0:
        for ended in select.select(list(started), [], [], left)[0]:
            os.close(ended)
            del started[ended]
    for fd in started:
        os.close(fd)
    assert not started, f"still running 30 s after the demo exited: {sorted(started.values())}"
    assert _processes_with(marker) == []


OUTAGE = re.compile(r"outage +sent")


def test_ctrl_c_during_the_outage_ends_within_seconds(tmp_path: Path) -> None:
    """Issue 34 item 7: Ctrl-C during the outage waited for the outage to end and the primary to
    restart (11.6 s with the demo's 6 s outage; 34 s with a 30 s one). Now the outage is
    cancelled with the rest: the primary stays down and the demo stops."""
    marker = f"AMQPLINK_DEMO_TEST={uuid.uuid4().hex}"
    argv = ("--rows", "1000000", "--outage-seconds", "120")
    with _demo_on_a_terminal(*argv, tmp_path=tmp_path, marker=marker) as (proc, master):
        seen = _read_until(master, OUTAGE, "")
        started = _pidfds(_processes_with(marker))
        os.killpg(proc.pid, signal.SIGINT)
        pressed = time.monotonic()
        after, out, took = _ended(proc, master, seen, pressed, OUTAGE)
    assert took < 20, f"{took:.1f} s from Ctrl-C to the exit, 118 s of outage left"
    _ended_cleanly(after, out, False, tmp_path)
    _all_gone(started, marker)


def _screen(raw: str) -> list[str]:
    """The lines a terminal shows for ``raw`` (each ``\\r`` or erase-line starts the line over)."""
    lines = []
    for line in raw.replace("\r\n", "\n").split("\n"):
        lines.append(re.split(r"\r|\x1b\[K", line)[-1])
    return lines


def test_the_demos_display_says_what_happens_on_lines_of_its_own() -> None:
    """Issue 34 item 7, on a terminal: Spark's WARN lines and the sink's summary broke into the
    progress line; each Spark worker printed a failover line blaming the user ("is the broker
    running and the port right?") for the outage the demo makes; "sent 202,859" of 200,000 and
    "duplicates removed 0" were not explained."""
    with _demo_on_a_terminal("--rows", "50000") as (proc, master):
        seen = ""
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:  # until the terminal closes: the demo has exited
            if not select.select([master], [], [], 5)[0]:
                continue
            try:
                seen += os.read(master, 65536).decode(errors="replace")
            except OSError:
                break
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, seen[-3000:]
    for noise in ("WARN", "is the broker running", "failover engaged", "log4j", "INFO"):
        assert noise not in seen, seen[-3000:]
    progress = re.compile(r"(spark|writing|outage|syphon|receiving) +sent")
    said = [line for line in _screen(seen) if line and not progress.match(line)]
    for opening in ("starting Spark", "outage: the demo stops the primary namespace for 6 s on purpose",
                    "failover: the sink's senders park rows", "the primary namespace is back",
                    "sink: write "):  # fmt: skip
        assert sum(line.startswith(opening) for line in said) == 1, said
    table = dict(re.split(r" {2,}", line, maxsplit=1) for line in out.splitlines() if "  " in line)
    took = int(table["messages the namespaces took"].replace(",", ""))
    dropped = int(table["copies dropped by the primary"].replace(",", ""))
    assert table["lost"] == "0" and took - 50_000 == dropped, out
    if dropped:
        assert f"sent 50,000 + {dropped:,} again" in seen
        assert f"({dropped:,} messages more than rows: batches the sink sent again" in out
