"""Debian's RabbitMQ 3.10 with the ``rabbitmq_amqp1_0`` plugin, run from a private directory.

Everything the node needs lives in a temporary directory: its config, plugins
file, Mnesia database, logs, pid file, and the Erlang cookie (``HOME``). The node
gets a unique name and free loopback ports for AMQP and Erlang distribution, and
registers with a private ``epmd`` this harness starts on a free port and stops on
exit, so nothing is shared with a system RabbitMQ or another test run. See the
RabbitMQ section of docs/peers.md for the quirks a client meets there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import signal
import socket
import string
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

__all__ = ["RabbitMQ", "ensure_installed"]

log = logging.getLogger(__name__)

BIN = Path("/usr/lib/rabbitmq/bin")
SERVER = BIN / "rabbitmq-server"
CTL = BIN / "rabbitmqctl"
PACKAGES = ("rabbitmq-server",)
LOG_TAIL = 4000


def ensure_installed() -> None:
    """Install Debian's ``rabbitmq-server`` (and with it Erlang and epmd) if it is missing."""
    if SERVER.exists():
        return
    log.info("installing %s with apt-get", " ".join(PACKAGES))
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    if not SERVER.exists():
        raise RuntimeError(f"apt-get installed {PACKAGES} but {SERVER} is still missing")


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1 (held open together so they differ)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-LOG_TAIL:].decode(errors="replace")


class RabbitMQ:
    """Start a private RabbitMQ node on 127.0.0.1; ``url`` and ``port`` are set on entry.

    ``url`` carries the default ``guest:guest`` credentials (RabbitMQ lets guest in
    from loopback only). Failing to start raises ``RuntimeError`` with the log tail.
    """

    def __init__(self, start_timeout: float = 60.0) -> None:
        self.start_timeout = start_timeout
        self.port = 0
        self.url = ""
        self.node = f"rabbit-{secrets.token_hex(4)}@localhost"
        self._dir: Path | None = None
        self._env: dict[str, str] = {}
        self._server: subprocess.Popen[bytes] | None = None
        self._epmd: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        return f"<RabbitMQ {self.node} {self.url or 'not started'}>"

    # -- start ------------------------------------------------------------------------
    def __enter__(self) -> RabbitMQ:
        ensure_installed()
        try:
            self._start()
        except BaseException:
            self._stop()
            raise
        return self

    def _start(self) -> None:
        base = Path(tempfile.mkdtemp(prefix="amqplink-rabbitmq-"))
        self._dir = base
        amqp_port, dist_port, epmd_port = _free_ports(3)
        home = base / "home"
        home.mkdir()
        # The node and rabbitmqctl must share a cookie; write it before either
        # starts, or each would make its own and the CLI could not reach the node.
        cookie = home / ".erlang.cookie"
        cookie.write_text("".join(secrets.choice(string.ascii_uppercase) for _ in range(20)))
        cookie.chmod(0o400)
        config = base / "rabbitmq.conf"
        config.write_text(
            f"listeners.tcp.default = 127.0.0.1:{amqp_port}\n"
            "distribution.listener.interface = 127.0.0.1\n"
            f"distribution.listener.port_range.min = {dist_port}\n"
            f"distribution.listener.port_range.max = {dist_port}\n"
            "loopback_users.guest = true\n"
        )
        plugins = base / "enabled_plugins"
        plugins.write_text("[rabbitmq_amqp1_0].\n")
        env_file = base / "rabbitmq-env.conf"  # keeps /etc/rabbitmq/rabbitmq-env.conf out
        env_file.write_text("")
        logs = base / "log"
        logs.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.update(
            HOME=str(home),
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(amqp_port),
            RABBITMQ_DIST_PORT=str(dist_port),  # else prelaunch checks AMQP port + 20000
            ERL_EPMD_ADDRESS="127.0.0.1",
            ERL_EPMD_PORT=str(epmd_port),
            RABBITMQ_CONF_ENV_FILE=str(env_file),
            RABBITMQ_CONFIG_FILE=str(config),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(base / "advanced.config"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(plugins),
            RABBITMQ_MNESIA_BASE=str(base / "mnesia"),
            RABBITMQ_LOG_BASE=str(logs),
            RABBITMQ_PID_FILE=str(base / "rabbitmq.pid"),
        )
        self._env = env
        deadline = time.monotonic() + self.start_timeout

        # A private epmd, owned (and later ended) by this harness alone.
        epmd = shutil.which("epmd") or "/usr/bin/epmd"
        with open(base / "epmd.out", "wb") as out:
            self._epmd = subprocess.Popen(
                [epmd, "-port", str(epmd_port), "-address", "127.0.0.1"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        while not _accepts(epmd_port):
            if self._epmd.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"epmd did not start on 127.0.0.1:{epmd_port}: {_tail(base / 'epmd.out')}")
            time.sleep(0.02)

        log.info("starting RabbitMQ %s on 127.0.0.1:%d in %s", self.node, amqp_port, base)
        with open(base / "server.out", "wb") as out:
            # setsid: the node gets a process group of its own (pid == pgid), which
            # lets _stop end it and its port programs together. Never RABBITMQ_ALLOW_INPUT.
            self._server = subprocess.Popen(
                ["setsid", str(SERVER)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=base,
            )
        self._await_startup(deadline)
        while not _accepts(amqp_port):
            self._check_alive("before opening its AMQP port")
            if time.monotonic() > deadline:
                self._fail(f"its AMQP port {amqp_port} did not open within {self.start_timeout} s")
            time.sleep(0.05)
        self.port = amqp_port
        self.url = f"amqp://guest:guest@127.0.0.1:{amqp_port}"
        log.info("RabbitMQ %s ready at amqp://127.0.0.1:%d", self.node, amqp_port)

    def _await_startup(self, deadline: float) -> None:
        """``rabbitmqctl await_startup`` until it succeeds, the node dies, or time is up."""
        while True:
            self._check_alive("during startup")
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail(f"rabbitmqctl await_startup did not succeed within {self.start_timeout} s")
            try:
                result = self._ctl("await_startup", "--timeout", str(max(1, int(left))), timeout=left + 10)
            except subprocess.TimeoutExpired:
                continue
            if result.returncode == 0:
                return
            # The node may not have registered with epmd yet: the CLI fails fast then.
            log.debug("await_startup: %s", result.stdout.strip())
            time.sleep(0.2)

    def _ctl(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CTL), "-n", self.node, *args],
            env=self._env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def _check_alive(self, when: str) -> None:
        server = self._server
        if server is not None and server.poll() is not None:
            self._fail(f"the node exited with status {server.returncode} {when}")

    def log_tail(self) -> str:
        """The end of the node's console output and of its log file."""
        if self._dir is None:
            return ""
        node_log = self._dir / "log" / f"{self.node}.log"
        return f"--- console ---\n{_tail(self._dir / 'server.out')}\n--- {node_log.name} ---\n{_tail(node_log)}"

    def _fail(self, reason: str) -> None:
        raise RuntimeError(f"RabbitMQ {self.node} did not start: {reason}\n{self.log_tail()}")

    # -- stop -------------------------------------------------------------------------
    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        server = self._server
        if server is not None:
            if server.poll() is None:
                try:
                    result = self._ctl("stop", timeout=30)
                    if result.returncode != 0:
                        log.warning("rabbitmqctl stop failed: %s", (result.stdout + result.stderr).strip())
                except subprocess.TimeoutExpired:
                    log.warning("rabbitmqctl stop did not finish in 30 s")
                try:
                    server.wait(15)
                except subprocess.TimeoutExpired:
                    log.warning("RabbitMQ %s still running after stop; killing its process group", self.node)
            # Whatever is left of the node's process group (port programs) goes too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
            self._server = None
        epmd = self._epmd
        if epmd is not None:
            epmd.terminate()
            try:
                epmd.wait(5)
            except subprocess.TimeoutExpired:
                epmd.kill()
                epmd.wait(5)
            self._epmd = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
