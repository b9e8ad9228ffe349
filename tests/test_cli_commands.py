"""The client commands (``send``, ``receive``, ``peek``, ``list``) run in-process against the
embedded broker (on its own thread), with the connection string it prints and with a URL."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.broker.config import parse_config
from amqplink.cli import main
from amqplink.servicebus import ServiceBusClient
from tests.conftest import broker_thread
from tests.servicebus.scenario import CONFIG

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture()
def namespace() -> Iterator[Broker]:
    """A configured namespace (queues plain, other, sessions; topic events with subscriptions all, red)."""
    with broker_thread(Broker(parse_config(CONFIG))) as broker:
        yield broker


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    """``amqplink ARGV``: exit status, stdout lines, stderr."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_send_body_properties_then_peek_and_receive_show_them(
    namespace: Broker, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    conn = namespace.connection_string
    code, out, err = run(capsys, "send", conn, "plain", "--body", "héllo", "--property", "kind=order",
                         "--property", "priority:=5", "--property", "rush:=true")  # fmt: skip
    assert code == 0, err
    assert json.loads(out[-1])["outcomes"] == {"accepted": 1}  # a body means one message
    (tmp_path / "body.bin").write_bytes(b"\x00\xffraw")
    code, out, err = run(capsys, "send", conn, "plain", "--body-file", str(tmp_path / "body.bin"), "--count", "2")
    assert code == 0 and json.loads(out[-1])["sent"] == 2, err

    code, out, err = run(capsys, "peek", conn, "plain", "--json")
    assert code == 0, err
    peeked = [json.loads(line) for line in out]
    assert [p["sequence_number"] for p in peeked] == [1, 2, 3]
    assert peeked[0]["body"] == "héllo"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", peeked[0]["enqueued_time"])
    assert peeked[0]["properties"] == {"kind": "order", "priority": 5, "rush": True}
    assert peeked[1]["body"] == b"\x00\xffraw".hex()  # not UTF-8: shown as hex
    code, out, _ = run(capsys, "peek", conn, "plain", "--from-sequence", "3")
    assert out == [b"\x00\xffraw".hex()]

    code, out, err = run(capsys, "receive", conn, "plain", "--count", "3", "--show")
    assert code == 0, err
    assert out[0] == "héllo" and json.loads(out[-1])["complete"] is True
    code, out, _ = run(capsys, "peek", conn, "plain")
    assert code == 0 and out == []  # received in peek-lock and completed


def test_session_id_is_sent_and_received(namespace: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    conn = namespace.connection_string
    for session, body in (("a", "for a"), ("b", "for b")):
        code, _, err = run(capsys, "send", conn, "sessions", "--body", body, "--session-id", session)
        assert code == 0, err
    code, out, err = run(capsys, "receive", conn, "sessions", "--session-id", "b", "--count", "1", "--show", "--json")
    assert code == 0, err
    shown = json.loads(out[0])
    assert shown["body"] == "for b" and shown["session_id"] == "b"


def test_subscription_address(namespace: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    conn = namespace.connection_string
    assert run(capsys, "send", conn, "events", "--body", "to all")[0] == 0
    code, out, err = run(capsys, "receive", conn, "events/Subscriptions/all", "--count", "1", "--show")
    assert code == 0 and out[0] == "to all", err


def test_send_stops_at_the_first_refusal_and_says_why(namespace: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    namespace.faults.run(namespace.faults.entity_unavailable, "plain")
    conn = namespace.connection_string
    code, out, err = run(capsys, "send", conn, "plain", "--count", "1000000", "--in-flight", "50")
    assert code == 1
    summary = json.loads(out[-1])
    assert summary["ok"] is False and summary["outcomes"].get("accepted", 0) == 0
    assert summary["sent"] < 1000  # stopped, not a million silent refusals
    assert "server-busy" in summary["stopped"] and "plain" in summary["stopped"]
    assert err.count("\n") == 1 and "server-busy" in err and not UUID.search(err)


def test_incomplete_receive_says_why(namespace: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    conn = namespace.connection_string
    assert run(capsys, "send", conn, "other", "--count", "2", "--size", "3")[0] == 0
    code, out, err = run(capsys, "receive", conn, "other", "--count", "5", "--timeout", "0.3")
    assert code == 1
    summary = json.loads(out[-1])
    assert summary["count"] == 2 and summary["complete"] is False
    assert summary["stopped"] == "received 2 of 5: other: no message came for 0.3 s (--timeout)"
    assert "received 2 of 5" in err


def test_unknown_entity_is_named_without_a_link_id(namespace: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "receive", namespace.connection_string, "nosuch", "--count", "1")
    assert code == 1
    summary = json.loads(out[-1])
    assert summary["count"] == 0 and "nosuch" in summary["stopped"]
    assert err.startswith("amqplink receive: ") and "nosuch" in err and "not-found" in err
    assert not UUID.search(err), err
    code, _, err = run(capsys, "send", f"amqp://127.0.0.1:{namespace.port}", "nosuch", "--count", "1")
    assert code == 1 and "'nosuch'" in err and not UUID.search(err), err


def test_require_auth_broker_takes_the_connection_string_not_a_bare_url(capsys: pytest.CaptureFixture[str]) -> None:
    with broker_thread(Broker(servicebus=True, require_auth=True)) as broker:
        conn = broker.connection_string
        assert "SAS_KEY_VALUE" not in conn  # strict: a random key
        code, out, err = run(capsys, "send", conn, "q", "--body", "signed")
        assert code == 0, err
        code, out, err = run(capsys, "receive", conn, "q", "--count", "1", "--show")
        assert code == 0 and out[0] == "signed", err
        code, _, err = run(capsys, "send", f"amqp://127.0.0.1:{broker.port}", "q", "--count", "1")
        assert code == 1 and "'q'" in err and "amqp:unauthorized-access" in err
        assert "give the connection string it prints" in err
        wrong = conn.replace("SharedAccessKey=", "SharedAccessKey=x")
        code, _, err = run(capsys, "send", wrong, "q", "--count", "1")
        assert code == 1 and "SharedAccessKey=" not in err  # the key is never echoed


def test_list_reads_the_management_api(capsys: pytest.CaptureFixture[str]) -> None:
    with broker_thread(Broker(parse_config(CONFIG), http_port=0)) as broker:
        conn = broker.connection_string
        with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_sender("plain") as sender:
            sender.send_messages([{"body": "x"}, {"body": "y"}])  # type: ignore[list-item]
        api = ("--http-port", str(broker.http_port), "--ca", broker.http_ca)
        code, out, err = run(capsys, "list", conn, *api, "--json")
        assert code == 0, err
        rows: dict[str, Any] = {row["entity"]: row for row in json.loads(out[-1])["entities"]}
        assert rows["plain"] == {"entity": "plain", "kind": "queue", "active": 2, "dead_letter": 0, "scheduled": 0}
        assert rows["events"]["kind"] == "topic" and rows["events/Subscriptions/red"]["active"] == 0
        code, out, err = run(capsys, "list", conn, *api)
        assert code == 0 and out[0].split() == ["ENTITY", "KIND", "ACTIVE", "DEAD-LETTER", "SCHEDULED"]
        assert ["plain", "queue", "2", "0", "0"] in [line.split() for line in out]
        code, _, err = run(capsys, "list", conn)  # the emulator's string names the AMQP port
        assert code == 2 and "--http-port" in err


def test_peek_and_list_need_the_connection_string(namespace: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"amqp://127.0.0.1:{namespace.port}"
    code, _, err = run(capsys, "peek", url, "plain")
    assert code == 2 and "connection string" in err
    code, _, err = run(capsys, "send", "Endpoint=sb://h;SharedAccessKeyName=n;SharedAccessKey=s3cret", "q", "--settled")
    assert code == 2 and "--settled" in err and "s3cret" not in err
    code, _, err = run(capsys, "send", "not-a-target-s3cret", "q")
    assert code == 2 and "Endpoint=sb://" in err and "s3cret" not in err
    code, _, err = run(capsys, "send", url, "plain", "--property", "novalue")
    assert code == 2 and "NAME=TEXT" in err


def test_a_receive_cut_short_by_the_broker_reports_what_it_got(
    namespace: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fault injection: the namespace detaches the receiver's link while it waits for more."""
    assert run(capsys, "send", namespace.connection_string, "plain", "--count", "3", "--size", "4")[0] == 0
    url = f"amqp://127.0.0.1:{namespace.port}"
    done: list[int] = []
    worker = threading.Thread(target=lambda: done.append(main(["receive", url, "plain", "--count", "10",
                                                                "--timeout", "60"])))  # fmt: skip
    worker.start()
    queue = namespace.namespace.queues["plain"]
    deadline = time.monotonic() + 30
    while namespace.faults.run(lambda: len(queue.store)) > 0:  # all three received and accepted
        assert time.monotonic() < deadline, "the receive took nothing"
        time.sleep(0.01)
    namespace.faults.run(namespace.faults.detach_links, "plain")
    worker.join(30)
    assert done == [1]
    out, err = capsys.readouterr()
    summary = json.loads(out.splitlines()[-1])
    assert summary["count"] == 3 and summary["requested"] == 10
    assert "detach-forced" in summary["stopped"] and "'plain'" in summary["stopped"]
    assert "detach-forced" in err and not UUID.search(err)


def test_a_message_too_large_is_one_refusal_whichever_client(
    namespace: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 34 item 6: with the connection string it was exit status 2 (a ValueError), with the URL
    1, and the URL's message had neither the condition nor the hint. Now both stop at the first
    message, as at a broker's refusal, with one text and exit status 1."""
    seen = []
    for target in (namespace.connection_string, namespace.url):
        code, out, err = run(capsys, "send", target, "plain", "--size", "300000", "--count", "1000")
        summary = json.loads(out[-1])
        assert code == 1, err
        assert summary["sent"] == 1 and summary["outcomes"] == {"refused": 1}  # nothing more handed over
        assert err.count("\n") == 1 and "Traceback" not in err
        seen.append(summary["stopped"])
    assert seen[0] == seen[1]
    assert seen[0].startswith("plain: message 0 (counting from 0) was not accepted: ")
    assert "exceeds the peer's max-message-size 262144 [amqp:link:message-size-exceeded]" in seen[0]
    assert seen[0].endswith("Send a smaller message, or split the batch.")


def test_body_file_dash_reads_standard_input(
    namespace: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 34 item 5: ``--body-file -`` said ``[Errno 2] No such file or directory: '-'``."""
    import io

    class Stdin:
        buffer = io.BytesIO(b'{"id": 7}')

    monkeypatch.setattr("sys.stdin", Stdin())
    conn = namespace.connection_string
    code, out, err = run(capsys, "send", conn, "other", "--body-file", "-")
    assert code == 0 and json.loads(out[-1])["outcomes"] == {"accepted": 1}, err
    code, out, err = run(capsys, "receive", conn, "other", "--count", "1", "--show")
    assert code == 0 and out[0] == '{"id": 7}', err
    missing = tmp_path / "order.json"
    code, out, err = run(capsys, "send", conn, "other", "--body-file", str(missing))
    assert code == 2 and err == f"amqplink send: --body-file {missing}: No such file or directory\n"
