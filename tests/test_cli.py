"""The ``amqplink`` command: help, version, and the demo/send/receive/broker commands."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from amqplink import __version__
from amqplink.cli import main


def test_help_exits_zero_and_names_the_program(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "amqplink" in capsys.readouterr().out


def test_version_flag_prints_the_package_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    assert __version__ in proc.stdout


def test_demo_round_trips_through_the_embedded_broker(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--count", "500", "--size", "64", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1  # --json: the JSON line only
    result = json.loads(out[0])
    assert result["ok"] is True and result["received"] == 500 and result["lost"] == 0


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
