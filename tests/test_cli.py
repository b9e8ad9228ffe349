"""The ``amqplink`` command: help, version, and the roundtrip/send/receive/broker commands."""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from amqplink import __version__
from amqplink.broker import Broker
from amqplink.cli import build_parser, main
from amqplink.message import Message
from amqplink.sync import connect as sync_connect
from tests import processes


def test_no_command_prints_help_on_stderr_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "usage: amqplink" in captured.err and "examples:" in captured.err


@pytest.mark.slow  # the command as a process
def test_version_flag_prints_the_package_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    assert __version__ in proc.stdout


def test_roundtrip_through_the_embedded_broker(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["roundtrip", "--count", "500", "--size", "64", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1  # --json: the JSON line only
    result = json.loads(out[0])
    assert result["ok"] is True and result["received"] == 500 and result["lost"] == 0
    assert result["broker"] == "embedded Service Bus namespace"


@pytest.mark.slow  # a broker process and three commands: 5 s
def test_send_and_receive_commands_against_a_broker_process() -> None:
    broker = subprocess.Popen(
        [sys.executable, "-m", "amqplink.cli", "broker", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert broker.stdout is not None
        line = broker.stdout.readline()
        assert "listening on amqp://" in line, line
        url = line.split()[-1]
        send = subprocess.run(
            [
                sys.executable,
                "-m",
                "amqplink.cli",
                "send",
                url,
                "cli-q",
                "--count",
                "300",
                "--size",
                "100",
                "--in-flight",
                "50",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert send.returncode == 0, send.stderr
        sent = json.loads(send.stdout.strip().splitlines()[-1])
        assert sent["outcomes"] == {"accepted": 300} and sent["messages_per_second"] > 0
        receive = subprocess.run(
            [sys.executable, "-m", "amqplink.cli", "receive", url, "cli-q", "--count", "300", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert receive.returncode == 0, receive.stderr
        got = json.loads(receive.stdout)
        assert got["count"] == 300 and got["body_bytes"] == 300 * 100 and got["complete"]
        missing = subprocess.run(
            [
                sys.executable,
                "-m",
                "amqplink.cli",
                "receive",
                url,
                "cli-q",
                "--count",
                "1",
                "--timeout",
                "0.2",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert missing.returncode == 1 and json.loads(missing.stdout)["complete"] is False
    finally:
        broker.terminate()
        broker.wait(10)


def test_unreachable_broker_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["send", "amqp://127.0.0.1:1", "q", "--count", "1"]) == 1
    err = capsys.readouterr().err
    assert "cannot connect to amqp://127.0.0.1:1" in err


@pytest.mark.slow  # the command as a process
def test_bad_port_is_one_clear_line_not_a_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "broker", "--port", "99999"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "--port" in lines[0] and "99999" in lines[0] and "0..65535" in lines[0]


@pytest.mark.slow  # the command as a process
def test_unknown_host_is_one_clear_line_not_a_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "broker", "--host", "256.0.0.1", "--port", "0"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot listen on 256.0.0.1:0" in lines[0], proc.stderr


@pytest.mark.parametrize(
    "command", ["demo", "roundtrip", "send", "receive", "peek", "list", "spark-package", "broker", "broker-fault"]
)
def test_help_shows_each_meaningful_default_once(command: str) -> None:
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    formatter = sub._get_formatter()
    for action in sub._actions:
        if not action.option_strings or action.dest in ("help", "verbose"):
            continue
        text = formatter._expand_help(action)  # type: ignore[attr-defined]
        assert text.count("default") <= 1, (command, action.dest, text)
        if action.default not in (None, False, [], argparse.SUPPRESS):
            assert "default" in text, (command, action.dest, text)
        assert "(default: None)" not in text and "(default: False)" not in text, (command, action.dest)


def test_help_fits_an_80_column_terminal_but_for_example_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    """`amqplink demo --help` printed its 206-character description as one line."""
    monkeypatch.setenv("COLUMNS", "80")
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name, sub in [("amqplink", parser), *commands.items()]:
        text = sub.format_help()
        long = [line for line in text.splitlines() if len(line) > 80 and not line.startswith("  amqplink ")]
        assert long == [], name
        assert sub.description is None or " ".join(sub.description.split()) in " ".join(text.split()), name
    examples = commands["broker"].format_help()
    assert "  amqplink broker --port 0 --data-dir ./data  (any free port; messages kept across restarts)\n" in examples


def _interrupt_when(argv: list[str], ready: re.Pattern[str]) -> tuple[int, dict[str, Any], int]:
    """Run the CLI with stderr on a pseudo-terminal (so it draws its progress bar),
    wait until the bar matches ``ready``, press Ctrl-C (SIGINT); return the exit
    code, the final JSON line and the progress count seen before the interrupt."""
    master, slave = pty.openpty()
    started = processes.interruptible(
        [sys.executable, "-m", "amqplink.cli", *argv], stdout=subprocess.PIPE, stderr=slave, text=True
    )
    os.close(slave)
    seen = ""
    deadline = time.monotonic() + 60
    try:
        with processes.running(started) as proc:
            while (match := ready.search(seen)) is None:
                left = deadline - time.monotonic()
                assert left > 0 and proc.poll() is None, f"no progress before the deadline: {seen[-300:]!r}"
                readable, _, _ = select.select([master], [], [], left)
                if readable:
                    seen += os.read(master, 65536).decode(errors="replace")
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
    finally:
        os.close(master)
    return proc.returncode, json.loads(out.strip().splitlines()[-1]), int(match.group(1))


@pytest.mark.slow  # the command as a process, interrupted
def test_ctrl_c_during_send_prints_the_partial_summary_and_exits_130(embedded_broker: Broker) -> None:
    code, summary, shown = _interrupt_when(
        ["send", embedded_broker.url, "cli-int", "--count", "50000000", "--size", "16"],
        re.compile(r"(\d{4,})/50000000"),
    )
    assert code == 130
    assert summary["interrupted"] is True and summary["command"] == "send"
    accepted = summary["outcomes"].get("accepted", 0)
    assert shown <= accepted <= summary["sent"] < 50_000_000
    # every message the summary calls accepted is stored by the broker
    assert accepted <= len(embedded_broker.queue("cli-int")) <= summary["sent"]


@pytest.mark.slow  # the command as a process, interrupted
def test_ctrl_c_during_receive_prints_the_partial_summary_and_exits_130(embedded_broker: Broker) -> None:
    with sync_connect(embedded_broker.url) as conn, conn.create_sender("cli-rcv") as sender:
        sender.send_many([Message(b"m") for _ in range(5)])
    code, summary, shown = _interrupt_when(
        ["receive", embedded_broker.url, "cli-rcv", "--count", "10", "--timeout", "120"],
        re.compile(r"(5)/10"),
    )
    assert code == 130
    assert summary == {**summary, "interrupted": True, "command": "receive", "count": 5, "requested": 10}
    assert shown == 5 and summary["body_bytes"] == 5


@pytest.mark.slow  # the command as a process, interrupted
def test_ctrl_c_during_roundtrip_prints_the_partial_summary_and_exits_130() -> None:
    code, summary, shown = _interrupt_when(
        ["roundtrip", "--count", "50000000", "--size", "16"], re.compile(r"send roundtrip \[[#.]+\] (\d{4,})/")
    )
    assert code == 130
    assert summary["interrupted"] is True and summary["command"] == "roundtrip"
    assert shown <= summary["accepted"] <= summary["sent"] < 50_000_000 and summary["received"] == 0
