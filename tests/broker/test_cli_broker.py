"""``amqplink broker --config``: the emulator's Config.json, the printed connection string, bad files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode

from tests.broker.test_sdk import CONFIG

ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def start_broker(*args: str) -> tuple[subprocess.Popen[str], str]:
    """``amqplink broker --port 0 ARGS`` as a subprocess, and the connection string it prints."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "amqplink.cli", "broker", "--port", "0", *args],
        stdout=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    assert proc.stdout is not None
    assert "listening on amqp://" in proc.stdout.readline()
    return proc, proc.stdout.readline().strip()


def test_broker_command_with_an_emulator_config(tmp_path: Path) -> None:
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(CONFIG))
    proc, conn_str = start_broker("--config", str(path))
    try:
        assert proc.stdout is not None
        assert conn_str.startswith("Endpoint=sb://127.0.0.1:") and conn_str.endswith(
            ";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
        )
        with ServiceBusClient.from_connection_string(conn_str) as client:
            with client.get_queue_sender("q0") as sender:
                sender.send_messages(ServiceBusMessage("via the CLI"))
            mode = ServiceBusReceiveMode.RECEIVE_AND_DELETE
            with client.get_queue_receiver("q0", receive_mode=mode, max_wait_time=5) as receiver:
                assert [str(m) for m in receiver.receive_messages(max_wait_time=5)] == ["via the CLI"]
    finally:
        proc.terminate()
        proc.wait(10)


def test_broker_command_names_the_bad_field(tmp_path: Path) -> None:
    path = tmp_path / "Config.json"
    path.write_text(
        json.dumps(
            {"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": {"LockDuration": "PT1X"}}]}]}}
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "broker", "--port", "0", "--config", str(path)],
        capture_output=True, text=True, timeout=60, env=ENV, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert (
        "UserConfig.Namespaces[0].Queues[0].Properties.LockDuration: 'PT1X' is not an ISO-8601 duration" in done.stderr
    )


def test_broker_command_serves_the_management_api(tmp_path: Path) -> None:
    from azure.servicebus.management import ServiceBusAdministrationClient

    proc, conn_str = start_broker("--http-port", "0")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("management API on https://127.0.0.1:")
        port = int(line.split("https://127.0.0.1:")[1].split()[0])
        ca = line.rsplit("CA certificate: ", 1)[1].strip().rstrip(")")
        admin_conn = (
            f"Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE"
        )
        with ServiceBusAdministrationClient.from_connection_string(admin_conn, connection_verify=ca) as admin:
            admin.create_queue("made-over-http")
        with ServiceBusClient.from_connection_string(conn_str) as c, c.get_queue_sender("made-over-http") as s:
            s.send_messages(ServiceBusMessage("x"))
        with ServiceBusAdministrationClient.from_connection_string(admin_conn, connection_verify=ca) as admin:
            assert admin.get_queue_runtime_properties("made-over-http").active_message_count == 1
    finally:
        proc.terminate()
        proc.wait(10)


def test_broker_command_refuses_http_port_with_plain() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "broker", "--port", "0", "--plain", "--http-port", "0"],
        capture_output=True, text=True, timeout=60, env=ENV, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "--http-port" in done.stderr
