"""What the tests outside the fast tier need, probed once per run.

Each :class:`Peer` knows how to tell whether it is present (a file, a program, an
importable package) and the command that installs it. :class:`Peers` (one per pytest
run, ``tests/conftest.py``) caches every probe. In the fast tier a missing peer skips
the test with the reason and that command; in a full run (``--full`` or ``CI=true``)
it fails the test, after one attempt to install every missing Debian package in a
single ``apt-get`` run.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servicebus.sdk_suite.source import present as sdk_tests_present

__all__ = ["PEERS", "Peer", "Peers"]

log = logging.getLogger(__name__)


def _importable(module: str) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            return False

    return probe


def _files(*paths: str, programs: tuple[str, ...] = ()) -> Callable[[], bool]:
    def probe() -> bool:
        return all(Path(p).exists() for p in paths) and all(shutil.which(p) for p in programs)

    return probe


def _pyspark() -> bool:
    return _importable("pyspark")() and shutil.which("java") is not None


@dataclass(frozen=True)
class Peer:
    """Something a test needs that the fast tier does not assume."""

    name: str
    what: str
    present: Callable[[], bool]
    apt: tuple[str, ...] = ()
    pip: str | None = None
    command: str | None = None
    """The command that fetches it, when it is neither a Debian nor a pip package."""

    @property
    def install(self) -> str:
        """The command that installs it."""
        if self.command:
            return self.command
        if self.apt:
            return f"apt-get install -y {' '.join(self.apt)}"
        return f"python3 -m pip install {self.pip}"


PEERS = {
    peer.name: peer
    for peer in (
        Peer(
            "rabbitmq",
            "RabbitMQ with its AMQP 1.0 plugin",
            _files("/usr/lib/rabbitmq/bin/rabbitmq-server"),
            apt=("rabbitmq-server",),
        ),
        Peer(
            "proton-c",
            "qpid-proton's C example broker (sources, library and gcc)",
            _files("/usr/share/proton/examples/c/broker.c", programs=("gcc",)),
            apt=("libqpid-proton11-dev", "libqpid-proton11-dev-examples", "gcc"),
        ),
        Peer(
            "proton-examples",
            "qpid-proton's Python examples (tx_send.py, tx_recv.py: its transaction API)",
            _files("/usr/share/proton/examples/python/tx_send.py", "/usr/share/proton/examples/python/tx_recv.py"),
            apt=("libqpid-proton11-dev-examples",),
        ),
        Peer(
            "amqp-specs",
            "the OASIS AMQP 1.0 XML (Debian's amqp-specs)",
            _files("/usr/share/amqp/specs/1-0/types.bare.xml"),
            apt=("amqp-specs",),
        ),
        Peer("proton", "qpid-proton's Python binding", _importable("proton"), pip="-e '.[test]'"),
        Peer("azure-servicebus", "the official SDK", _importable("azure.servicebus"), pip="-e '.[test]'"),
        Peer(
            "azure-servicebus-tests",
            "azure-servicebus's own tests (its source distribution)",
            sdk_tests_present,
            command="python3 -m tests.servicebus.sdk_suite.source",
        ),
        Peer("pdoc", "pdoc (builds the API reference)", _importable("pdoc"), pip="-e '.[test]'"),
        Peer("pyspark", "PySpark (and a JVM: apt-get install -y default-jre-headless)", _pyspark, pip="-e '.[spark]'"),
    )
}
"""Every peer by name; a test asks for one with the ``peer`` fixture or by the marker its imports give it."""


class Peers:
    """The probes of one run: each peer is looked at once, installed at most once."""

    def __init__(self, *, full: bool) -> None:
        self.full = full
        self._present: dict[str, bool] = {}
        self._apt_tried = False

    def present(self, name: str) -> bool:
        """Whether peer ``name`` is there (probed on first ask, then remembered)."""
        if name not in self._present:
            self._present[name] = bool(PEERS[name].present())
        return self._present[name]

    def missing_reason(self, name: str) -> str:
        peer = PEERS[name]
        return f"{peer.what} is missing; install it with: {peer.install}"

    def require(self, name: str) -> None:
        """Return if peer ``name`` is present; else skip (fast tier) or fail (full run)."""
        if self.present(name):
            return
        if self.full and PEERS[name].apt and not self._apt_tried:
            self._install_missing_apt()
            if self.present(name):
                return
        if self.full:
            pytest.fail(f"{self.missing_reason(name)} (a full run needs every peer)", pytrace=False)
        pytest.skip(self.missing_reason(name))

    def _install_missing_apt(self) -> None:
        """One ``apt-get update`` and one ``apt-get install`` for every missing Debian package."""
        self._apt_tried = True
        if not self._missing_apt() or shutil.which("apt-get") is None:
            return
        with open(os.path.join(tempfile.gettempdir(), "amqplink-peers-apt.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one apt-get at a time: each test worker may get here
            self._present.clear()  # another worker may have installed them meanwhile
            packages = self._missing_apt()
            if packages:
                self._apt_get(packages)
        self._present.clear()  # probe again

    def _missing_apt(self) -> list[str]:
        return sorted({p for name, peer in PEERS.items() if peer.apt and not self.present(name) for p in peer.apt})

    def _apt_get(self, packages: list[str]) -> None:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        log.warning("installing %s with apt-get (once for this run)", " ".join(packages))
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.warning("%s failed: %s", " ".join(cmd), exc)
                break
            if proc.returncode != 0:
                log.warning("%s exited %d: %s", " ".join(cmd), proc.returncode, proc.stderr[-2000:])
                break
