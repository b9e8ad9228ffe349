"""Child processes of the tests: started so that Ctrl-C reaches them, never left running.

A run started as a background job (``nohup``, ``cmd &`` in a script) inherits SIGINT
ignored, and a child inherits it from the run: Python started that way keeps ignoring
SIGINT instead of raising ``KeyboardInterrupt``, which is what the user asked for and
what a test of Ctrl-C must not inherit. :func:`interruptible` starts a child with SIGINT
at its default disposition whatever this process does with it. :func:`running` kills a
child still alive when its block ends, however it ends. :func:`children` lists this
process's live children, for ``tests/conftest.py``'s check that a test leaves none.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["children", "describe", "interruptible", "kill", "now_ticks", "running", "started_since", "started_ticks"]


def _caught(signum: int, frame: object) -> None:
    """A SIGINT that lands while a child is being started is ignored, as before."""


def interruptible(args: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(args, **popen)``, the child's SIGINT at its default disposition
    (Python then raises ``KeyboardInterrupt`` on it) and the child in a process group of
    its own (unless ``start_new_session``): a Ctrl-C at the terminal reaches it only when
    the test sends one. Call it from the main thread.

    POSIX exec keeps an ignored signal ignored and resets a caught one to its default; so
    while the child starts, SIGINT is caught here by a handler that does nothing, and put
    back as it was once the child has been started (no code runs between fork and exec, so
    this is safe with the threads the tests run)."""
    if not popen.get("start_new_session"):
        popen.setdefault("process_group", 0)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return subprocess.Popen(args, **popen)  # a handler already: exec resets it
    previous = signal.signal(signal.SIGINT, _caught)
    try:
        return subprocess.Popen(args, **popen)
    finally:
        signal.signal(signal.SIGINT, previous)


def kill(proc: subprocess.Popen[Any], timeout: float = 10) -> None:
    """SIGKILL ``proc`` unless it has ended, and reap it."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout)


@contextmanager
def running(proc: subprocess.Popen[Any]) -> Iterator[subprocess.Popen[Any]]:
    """``proc`` for the block; killed if it is still running when the block ends, so that
    a failed assertion or a timeout leaves no process behind."""
    try:
        yield proc
    finally:
        kill(proc)


def children(pid: int | None = None) -> frozenset[int]:
    """The live (not zombie) child processes of ``pid`` (this process), from ``/proc``
    (empty where there is none)."""
    task = Path(f"/proc/{pid or os.getpid()}/task")
    found: set[int] = set()
    try:
        for thread in task.iterdir():
            found.update(int(p) for p in (thread / "children").read_text().split())
    except OSError:
        return frozenset()
    return frozenset(p for p in found if _alive(p))


def now_ticks() -> int:
    """The time since boot in clock ticks, the unit of a process's start time in ``/proc``."""
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))


def started_since(pids: frozenset[int], ticks: int) -> frozenset[int]:
    """Those of ``pids`` started at ``ticks`` (:func:`now_ticks`) or later: a child listed
    after a test that was running before it (a wider fixture's, whose listing under a thread
    of this process the test's first look missed) is not the test's."""
    return frozenset(pid for pid in pids if (started_ticks(pid) or -1) >= ticks - 1)  # (a tick's slack)


def started_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (None: it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[19])  # field 22, starttime (fields[0] is field 3, the state)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")  # the state after "(comm)"


def describe(pid: int) -> str:
    """``pid`` and its command line."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return str(pid)
    return f"{pid} ({' '.join(a.decode(errors='replace') for a in argv if a)[:200]})"
