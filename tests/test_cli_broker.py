"""``amqplink broker`` as a user runs it (a subprocess): what it says at start, queues made on
first use, ``--strict-entities``, a port in use, Ctrl-C while it starts; and the help, version
and argument errors of every command."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import amqplink
from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, NamespaceConfig, QueueConfig
from amqplink.cli import build_parser
from amqplink.commands.broker import entity_lines
from tests import processes

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def amqplink_cmd(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amqplink", *argv], capture_output=True, text=True, timeout=timeout, env=ENV, check=False
    )


@contextmanager
def broker(*argv: str, until: str) -> Iterator[tuple[list[str], subprocess.Popen[str]]]:
    """A broker process; yields its stdout lines up to the first starting with ``until``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "amqplink", "broker", "--port", "0", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    with processes.running(proc):
        try:
            while not (lines and lines[-1].startswith(until)):
                line = proc.stdout.readline()
                assert line, f"the broker ended: {lines}"
                lines.append(line.rstrip("\n"))
            yield lines, proc
        finally:
            proc.terminate()
            proc.wait(20)


def test_no_command_is_a_usage_error() -> None:
    proc = amqplink_cmd()
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("usage: amqplink") and "send" in proc.stderr


def test_version_is_written_once() -> None:
    proc = amqplink_cmd("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"amqplink {amqplink.__version__}"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'attr = "amqplink.__version__"' in pyproject
    assert "\nversion =" not in pyproject.split("[tool.setuptools.dynamic]")[0]
    assert "MIT License" in (ROOT / "LICENSE").read_text()


@pytest.mark.parametrize("command", sorted(build_parser()._subparsers._group_actions[0].choices))  # type: ignore[union-attr]
def test_every_help_has_examples(command: str) -> None:
    sub = build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    text = sub.format_help()
    assert "examples:\n  amqplink " in text, command


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["send", "amqp://h", "q", "--count", "abc"], "amqplink send: error: argument --count: expected a whole"),
        (["receive", "amqp://h", "q", "--prefetch", "-1"], "amqplink receive: error: argument --prefetch: must be 0"),
        (["broker", "--port", "x"], "amqplink broker: error: argument --port: expected a whole number, not 'x'"),
        (["receive", "amqp://h", "q", "--timeout", "soon"], "expected a number of seconds, not 'soon'"),
    ],
)
def test_argument_errors_name_the_command_and_what_is_expected(argv: list[str], expected: str) -> None:
    proc = amqplink_cmd(*argv)
    assert proc.returncode == 2
    assert expected in proc.stderr and "_non_negative" not in proc.stderr and "invalid" not in proc.stderr


def test_port_in_use_suggests_port_0() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = amqplink_cmd("broker", "--port", str(port))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"amqplink broker: cannot listen on 127.0.0.1:{port}: port {port} is in use (another broker?);"
        " --port 0 takes any free port"
    ]


def _interrupted_while_starting(delay: float, data_dir: Path) -> tuple[int, str]:
    started = processes.interruptible(
        [sys.executable, "-m", "amqplink", "broker", "--port", "0", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    with processes.running(started) as proc:
        time.sleep(delay)  # a moment of start-up to interrupt, not a synchronisation
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    return proc.returncode, err


def _in_cpython_start_up(err: str) -> bool:
    """The interrupt landed before Python ran any of amqplink's code: ``runpy`` (finding the
    module) or ``site`` prints its own traceback there, which is not ours to change."""
    return "Traceback" in err and "amqplink" not in err.split("KeyboardInterrupt", 1)[0]


@pytest.mark.parametrize("delay", [0.2, 0.3, 0.4, 0.8])
def test_ctrl_c_while_starting_exits_without_a_traceback(delay: float, tmp_path: Path) -> None:
    """Interrupted while it loads its modules, opens the store or starts listening. On a loaded
    machine a moment can fall in CPython's own start-up (a traceback with no amqplink frame):
    that moment is tried again a little later, at most five times."""
    for attempt in range(5):
        code, err = _interrupted_while_starting(delay + 0.2 * attempt, tmp_path / str(attempt))
        if not _in_cpython_start_up(err):
            break
    assert "Traceback" not in err, err
    assert code in (130, -signal.SIGINT)


def test_first_use_is_a_warning_once_per_queue() -> None:
    with broker(until="queues are made on first use") as (lines, proc):
        assert "--strict-entities" in lines[-1]
        conn = lines[1]
        for _ in range(2):
            assert amqplink_cmd("send", conn, "typo-q", "--body", "x").returncode == 0
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert err.count("WARNING queue 'typo-q' created on first use") == 1, err


def test_strict_entities_refuses_unknown_queues() -> None:
    with broker("--strict-entities", until="no entities") as (lines, _):
        sent = amqplink_cmd("send", lines[1], "typo-q", "--body", "x")
    assert sent.returncode == 1
    assert "typo-q" in sent.stderr and "amqp:not-found" in sent.stderr


def test_broker_lists_what_it_read_back_from_its_data_dir(tmp_path: Path) -> None:
    with broker("--data-dir", str(tmp_path), until="queues are made") as (lines, _):
        conn = lines[1]
        assert json.loads(amqplink_cmd("send", conn, "orders", "--count", "3").stdout)["outcomes"] == {"accepted": 3}
        assert amqplink_cmd("send", conn, "other", "--body", "x").returncode == 0
    with broker("--data-dir", str(tmp_path), until="queues are made") as (lines, _):
        assert lines[2:] == [
            "entities (read back from --data-dir):",
            "  queue orders: 3 active, 0 dead-lettered, 0 scheduled",
            "  queue other: 1 active, 0 dead-lettered, 0 scheduled",
            "queues are made on first use of a new name (each logged once); --strict-entities refuses them",
        ]


def test_verbose_logs_connect_and_attach() -> None:
    with broker(until="queues are made") as (lines, _):
        proc = amqplink_cmd("send", lines[1], "q", "--body", "x", "-v")
    assert proc.returncode == 0, proc.stderr
    assert "connected to amqp://127.0.0.1:" in proc.stderr
    assert "sender to 'q' on amqp://127.0.0.1:" in proc.stderr and "attached" in proc.stderr
    assert "SAS_KEY_VALUE" not in proc.stderr


def test_entity_lines_name_each_namespace_of_a_config() -> None:
    config = BrokerConfig(
        (
            NamespaceConfig("first", queues=(QueueConfig("orders"),)),
            NamespaceConfig("second", queues=(QueueConfig("b"), QueueConfig("a"))),
        )
    )
    broker = Broker(config)
    lines = [line for ns in broker.namespaces.values() for line in entity_lines(ns, named=True)]
    assert lines == [
        "entities (namespace first, configured):",
        "  queue orders: 0 active, 0 dead-lettered, 0 scheduled",
        "entities (namespace second, configured):",
        "  queue a: 0 active, 0 dead-lettered, 0 scheduled",
        "  queue b: 0 active, 0 dead-lettered, 0 scheduled",
    ]
    assert entity_lines(Broker(BrokerConfig((NamespaceConfig("empty"),))).namespace) == [
        "no entities: links are refused (amqp:not-found) until some are defined (--config, REST API)"
    ]


_BLOCK_AIOHTTP = """
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name == "aiohttp" or name.startswith("aiohttp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Blocker())
from amqplink.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_http_port_without_the_broker_extra_says_which_to_install_in_one_line() -> None:
    """Issue 34 item 2: a full traceback ending in ``RuntimeError: ...needs aiohttp`` (exit 1)."""
    done = subprocess.run(
        [sys.executable, "-c", _BLOCK_AIOHTTP, "broker", "--port", "0", "--http-port", "0"],
        capture_output=True, text=True, timeout=60, env=ENV, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "amqplink broker: the management API (--http-port) needs aiohttp, in the broker extra:"
        " python3 -m pip install 'amqplink[broker]'\n"
    )
