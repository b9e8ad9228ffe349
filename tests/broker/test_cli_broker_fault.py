"""``amqplink broker-fault``: faults injected into a subprocess broker from the command line."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from amqplink.aio import connect
from amqplink.aio.errors import MessageRejected
from amqplink.message import Message
from amqplink.servicebus.connection_string import parse_connection_string

ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


@pytest.fixture(scope="module")
def conn_str() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "amqplink.cli", "broker", "--port", "0"], stdout=subprocess.PIPE, text=True, env=ENV
    )
    try:
        assert proc.stdout is not None
        assert "listening on amqp://" in proc.stdout.readline()
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(10)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "broker-fault", *args],
        capture_output=True, text=True, timeout=60, env=ENV, check=False,
    )  # fmt: skip


async def send(url: str, address: str) -> None:
    conn = await connect(url)
    try:
        await (await conn.create_sender(address)).send(Message(b"x"))
    finally:
        await conn.close()


def test_inject_then_clear_from_the_command_line(conn_str: str) -> None:
    url = parse_connection_string(conn_str).amqp_url
    done = cli(conn_str, "entity-unavailable", "--entity", "q", "--condition", "internal-error")
    assert done.returncode == 0, done.stderr
    fault = json.loads(done.stdout)
    assert fault["fault"] == "entity-unavailable" and fault["entity"] == "q" and fault["active"] is True
    assert fault["condition"] == "amqp:internal-error"
    with pytest.raises(MessageRejected) as refused:
        asyncio.run(send(url, "q"))
    assert refused.value.condition == "amqp:internal-error"
    # A URL with the (emulator's) key works as well as the connection string.
    listed = json.loads(cli(url, "list").stdout)["faults"]
    assert [(f["id"], f["fired"]) for f in listed] == [(fault["id"], 1)]
    done = cli(conn_str, "clear", "--id", str(fault["id"]))
    assert done.returncode == 0 and json.loads(done.stdout) == {"cleared": 1}
    asyncio.run(send(url, "q"))


def test_a_bad_fault_name_is_a_one_line_error(conn_str: str) -> None:
    done = cli(conn_str, "explode")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "amqplink broker-fault: error: argument FAULT: invalid choice: 'explode'" in done.stderr


def test_a_refused_request_is_a_one_line_error(conn_str: str) -> None:
    url = parse_connection_string(conn_str).amqp_url
    done = cli(url, "refuse-connections", "--key", "not-the-key")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("amqplink broker-fault: $control refused 'inject': 401 the token was refused")
    done = cli(conn_str, "fragment-unavailable", "--entity", "q", "--fragment", "3")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "400 'q' has 1 fragment(s): 3 is not one of them" in done.stderr
