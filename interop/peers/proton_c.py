"""Debian's qpid-proton C example broker, built here as a fast sink for client benchmarks.

The example (``/usr/share/proton/examples/c/broker.c`` from
``libqpid-proton11-dev-examples``) is compiled with three changes made to a copy:

* its ``WINDOW`` (the credit it grants each sender) is raised from 5 to 10,000, so
  the sink does not throttle a pipelining client;
* a receiver that attaches with snd-settle-mode ``unsettled`` gets its messages
  unsettled (the example always pre-settles), so a peek-lock receiver really
  settles each one;
* the broker settles such a delivery once the receiver's disposition arrives.

It is the same engine as proton's Python binding, so it is a sink, not an
independent implementation: interop tests use other peers.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from types import TracebackType

__all__ = ["ProtonCBroker", "build_broker"]

log = logging.getLogger(__name__)

EXAMPLES = Path("/usr/share/proton/examples/c")
PACKAGES = ("libqpid-proton11-dev", "libqpid-proton11-dev-examples", "gcc")
BUILD_DIR = Path(__file__).resolve().parent.parent / "build"
CREDIT_WINDOW = 10_000

# (anchor in broker.c, replacement): each anchor must be found exactly once.
_PATCHES: tuple[tuple[str, str], ...] = (
    ("const int WINDOW=5;", f"const int WINDOW={CREDIT_WINDOW};"),
    (
        "    pn_delivery_settle(d);  /* Pre-settled: unreliable, there will be no ack/ */",
        "    if (pn_link_remote_snd_settle_mode(s) == PN_SND_SETTLED) pn_delivery_settle(d);",
    ),
    (
        "     if (pn_delivery_readable(d)) {",
        "     if (pn_link_is_sender(pn_delivery_link(d))) {\n"
        "       if (pn_delivery_updated(d) && pn_delivery_remote_state(d)) pn_delivery_settle(d);\n"
        "     } else if (pn_delivery_readable(d)) {",
    ),
)


def _install_packages() -> None:
    log.info("installing %s with apt-get", " ".join(PACKAGES))
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *PACKAGES], check=True, env=env, stdout=subprocess.DEVNULL)


def _patched_source() -> str:
    source = (EXAMPLES / "broker.c").read_text()
    for anchor, replacement in _PATCHES:
        count = source.count(anchor)
        if count != 1:
            raise RuntimeError(f"broker.c: expected one {anchor!r}, found {count}; has the example changed?")
        source = source.replace(anchor, replacement)
    return source


def build_broker() -> Path:
    """Compile the patched example broker once (installing its packages if needed); return the binary."""
    if not (EXAMPLES / "broker.c").exists() or shutil.which("gcc") is None:
        _install_packages()
    source = _patched_source()
    BUILD_DIR.mkdir(exist_ok=True)
    binary = BUILD_DIR / "proton-c-broker"
    stamp = BUILD_DIR / "proton-c-broker.c"
    if binary.exists() and stamp.exists() and stamp.read_text() == source:
        return binary
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(EXAMPLES / "thread.h", tmp)
        (Path(tmp) / "broker.c").write_text(source)
        cmd = ["gcc", "-O2", "-o", str(binary), "broker.c", "-lqpid-proton", "-lpthread"]
        result = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"building the proton C broker failed:\n{result.stderr[-2000:]}")
    stamp.write_text(source)
    return binary


class ProtonCBroker:
    """Run the patched C broker on 127.0.0.1 with an ephemeral port; ``url`` is set on entry."""

    def __init__(self, start_timeout: float = 10.0) -> None:
        self.start_timeout = start_timeout
        self.port = 0
        self.url = ""
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> ProtonCBroker:
        binary = build_broker()
        process = subprocess.Popen(
            [str(binary), "127.0.0.1", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self._process = process
        assert process.stdout is not None
        # The broker prints "listening on PORT" once its listener is open (after a
        # warning that it has no TLS certificate, which a plain-AMQP sink does not need).
        seen: list[str] = []
        match = None
        while match is None and len(seen) < 20:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            match = re.match(r"listening on (\d+)", line)
        if match is None:
            self.__exit__(None, None, None)
            raise RuntimeError(f"the proton C broker did not start: {''.join(seen)!r}")
        self.port = int(match.group(1))
        # Keep draining its output so a chatty broker never blocks on a full pipe.
        threading.Thread(target=_drain, args=(process,), name="proton-c-broker-output", daemon=True).start()
        self.url = f"amqp://127.0.0.1:{self.port}"
        log.info("proton C broker listening on %s", self.url)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        process = self._process
        if process is None:
            return
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        self._process = None


def _drain(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        log.debug("proton C broker: %s", line.rstrip())
