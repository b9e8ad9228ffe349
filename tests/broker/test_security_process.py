"""``amqplink broker`` as a process: strict mode never runs on the public emulator key (issue
23, item 6), and SIGTERM shuts it down as SIGINT does (item 12): exit code 0, the generated
TLS certificate and key gone, the data directory readable and complete."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from amqplink.broker.sbserver import EMULATOR_KEY
from amqplink.commands.broker import parse_keys
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage
from amqplink.servicebus.exceptions import ServiceBusAuthenticationError, ServiceBusAuthorizationError

ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def start(*args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """``amqplink broker --port 0 ARGS`` and the lines it prints up to its connection string
    (and the management API's line when ``--http-port`` is given)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "amqplink.cli", "broker", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    assert proc.stdout is not None
    lines = [proc.stdout.readline(), proc.stdout.readline()]
    if "--http-port" in args:
        lines.append(proc.stdout.readline())
    assert "listening on amqp://" in lines[0], proc.stderr.read() if proc.stderr else ""
    return proc, [line.strip() for line in lines]


def _key(conn_str: str) -> str:
    match = re.search(r"SharedAccessKey=([^;]+)", conn_str)
    assert match is not None
    return match[1]


def test_strict_mode_without_a_key_makes_a_random_one_printed_once() -> None:
    proc, (_, conn_str) = start("--require-auth")
    try:
        key = _key(conn_str)
        assert key != EMULATOR_KEY and len(key) >= 32
        with ServiceBusClient.from_connection_string(conn_str) as client, client.get_queue_sender("strict") as sender:
            sender.send_messages(ServiceBusMessage("with the printed key"))
        public = conn_str.replace(key, EMULATOR_KEY)
        refused = ServiceBusClient.from_connection_string(public, retry_total=0)
        with refused, pytest.raises(ServiceBusAuthenticationError), refused.get_queue_sender("strict") as sender:
            sender.send_messages(ServiceBusMessage("with the public key"))
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert key not in err  # printed once: in the connection string, never in a log line


def test_strict_mode_with_a_key_uses_that_key() -> None:
    proc, (_, conn_str) = start("--require-auth", "--key", "given-key-1234")
    try:
        assert _key(conn_str) == "given-key-1234"
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_parse_keys_plain_and_rules() -> None:
    plain, rules = parse_keys(["abc==", "sender=s3cr=t==:Send", "both=k:listen,SEND", "admin=x:Manage"], "Root")
    assert plain == {"Root": "abc=="}
    assert [(r.name, r.keys, r.rights.value) for r in rules] == [
        ("sender", ("s3cr=t==",), 2),
        ("both", ("k",), 3),
        ("admin", ("x",), 7),
    ]
    assert "s3cr" not in repr(rules)
    with pytest.raises(ValueError, match="one plain key"):
        parse_keys(["a", "b"])
    with pytest.raises(ValueError, match="given twice"):
        parse_keys(["r=a:Send", "r=b:Listen"])


def test_sigterm_shuts_down_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc, lines = start("--http-port", "0", "--data-dir", str(data))
    conn_str, http_line = lines[1], lines[2]
    ca = Path(http_line.rsplit("CA certificate: ", 1)[1].rstrip(")"))
    assert ca.exists() and (ca.parent / "key.pem").exists()
    with ServiceBusClient.from_connection_string(conn_str) as client, client.get_queue_sender("kept") as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(50)])
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert not ca.parent.exists()  # the generated certificate and its private key are gone
    shown = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "broker-store", str(data)],
        capture_output=True, text=True, timeout=60, env=ENV, check=True,
    )  # fmt: skip
    assert "kept" in shown.stdout
    # started again on the directory, it has every message
    proc, (_, conn_str) = start("--data-dir", str(data))
    try:
        client = ServiceBusClient.from_connection_string(conn_str)
        got: list[str] = []
        with client, client.get_queue_receiver("kept", max_wait_time=5) as receiver:
            while len(got) < 50:
                batch = receiver.receive_messages(max_message_count=50, max_wait_time=5)
                assert batch, f"only {len(got)} of 50 came back"
                for message in batch:
                    got.append(str(message))
                    receiver.complete_message(message)
        assert sorted(got) == sorted(f"m{i}" for i in range(50))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_sigterm_before_anything_else_is_still_a_clean_stop() -> None:
    proc, _ = start()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in err
    assert [line for line in err.splitlines() if line.strip()] == ["WARNING SIGTERM: stopping the broker"]


def test_key_rules_on_the_command_line() -> None:
    proc, (_, conn_str) = start("--require-auth", "--key", "root=root-key:Manage", "--key", "sender=send-key:Send")
    try:
        assert "SharedAccessKeyName=root;SharedAccessKey=root-key;" in conn_str  # the Manage rule
        sender_str = conn_str.replace(
            "SharedAccessKeyName=root;SharedAccessKey=root-key", "SharedAccessKeyName=sender;SharedAccessKey=send-key"
        )
        with ServiceBusClient.from_connection_string(sender_str) as client:
            with client.get_queue_sender("cli-rules") as sender:
                sender.send_messages(ServiceBusMessage("sent with the Send rule"))
            with pytest.raises(ServiceBusAuthorizationError), client.get_queue_receiver("cli-rules") as receiver:
                receiver.receive_messages(max_wait_time=5)
        with (
            ServiceBusClient.from_connection_string(conn_str) as client,
            client.get_queue_receiver("cli-rules") as receiver,
        ):
            (message,) = receiver.receive_messages(max_wait_time=5)
            assert str(message) == "sent with the Send rule"
            receiver.complete_message(message)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
