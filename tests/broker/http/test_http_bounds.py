"""The management API's bounds over raw sockets: deadlines, the connection cap, header
size, quiet logging of malformed requests, and fuzzing of the request parser."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
import tracemalloc
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqplink.broker import Broker
from amqplink.broker.http.bounds import MAX_HEADER_SIZE, MAX_HEADERS
from amqplink.servicebus.sas import generate_sas_token
from tests.broker.sdkutil import running_broker

KEY_NAME, KEY = "RootManageSharedAccessKey", "SAS_KEY_VALUE"
T = 1.0  # handshake_timeout in these tests
SLACK = 2.0  # timers fire on the loop's next turn; a busy machine adds to it
FUZZ_T = 0.5  # handshake_timeout of the fuzzed broker: an incomplete request waits this long


def tls_context(broker: Broker) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=broker.http_ca)


def authorization(broker: Broker) -> str:
    return generate_sas_token(f"https://127.0.0.1:{broker.http_port}", KEY_NAME, KEY, int(time.time()) + 3600)


def get(broker: Broker, path: str = "/$namespaceinfo", extra: str = "") -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{broker.http_port}\r\n"
        f"Authorization: {authorization(broker)}\r\n{extra}\r\n"
    ).encode()


async def tls_open(broker: Broker) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(
        "127.0.0.1", broker.http_port, ssl=tls_context(broker), server_hostname="127.0.0.1"
    )


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> float:
    """Seconds until the server closes the connection (reading and dropping what it sends)."""
    start = time.monotonic()

    async def drain() -> None:
        try:
            while await reader.read(65536):
                pass
        except (ConnectionError, ssl.SSLError):
            pass

    await asyncio.wait_for(drain(), seconds)
    return time.monotonic() - start


async def response_head(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)


def status(head: bytes) -> int:
    assert head.startswith(b"HTTP/1."), head[:80]
    return int(head[9:12])


def content_length(head: bytes) -> int:
    return int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")).split(b":")[1])


def bounded_broker(handshake_timeout: float = T, idle_timeout: float = 60.0, max_connections: int = 1000) -> Broker:
    return Broker(
        servicebus=True,
        http_port=0,
        handshake_timeout=handshake_timeout,
        idle_timeout=idle_timeout,
        max_connections=max_connections,
    )


async def test_a_client_that_never_starts_tls_is_closed_at_the_handshake_timeout() -> None:
    async with bounded_broker() as broker:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.http_port)
        took = await closed_within(reader, T + SLACK)
        assert took >= T * 0.8
        writer.close()


async def test_a_slow_request_head_is_closed_though_bytes_keep_coming() -> None:
    async with bounded_broker() as broker:
        reader, writer = await tls_open(broker)
        head = get(broker)[:-2]  # never the final empty line
        sent = 0

        async def trickle() -> None:  # a byte every tenth of the deadline (slowloris): 10 T in all
            nonlocal sent
            for byte in head:
                writer.write(bytes([byte]))
                sent += 1
                await asyncio.sleep(T / 10)

        sender = asyncio.ensure_future(trickle())
        try:
            await closed_within(reader, T + SLACK)
        finally:
            sender.cancel()
        assert 0 < sent < len(head) // 2  # closed while the client was still sending
        writer.close()


async def test_a_slow_body_is_closed_at_the_deadline() -> None:
    async with bounded_broker() as broker:
        reader, writer = await tls_open(broker)
        head = get(broker, "/q1", "Content-Length: 1000\r\nContent-Type: application/atom+xml\r\n")
        writer.write(head.replace(b"GET ", b"PUT ", 1) + b"<entry")
        await writer.drain()
        took = await closed_within(reader, T + SLACK)
        assert took <= T + SLACK
        writer.close()


async def test_keep_alive_idle_is_bounded_and_a_fair_client_keeps_its_connection() -> None:
    async with bounded_broker(idle_timeout=1.0) as broker:
        reader, writer = await tls_open(broker)
        for _ in range(3):  # several requests on one connection, each well within the deadline
            writer.write(get(broker))
            head = await response_head(reader)
            assert head.startswith(b"HTTP/1.1 200"), head
            length = int(
                next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")).split(b":")[1]
            )
            await reader.readexactly(length)
        took = await closed_within(reader, 1.0 + SLACK)
        assert took >= 0.8
        writer.close()


async def test_pipelined_requests_are_each_answered() -> None:
    async with bounded_broker() as broker:
        reader, writer = await tls_open(broker)
        writer.write(get(broker) + get(broker, "/$Resources/queues") + get(broker, "/no-such-queue"))
        statuses = []
        for _ in range(3):
            head = await response_head(reader)
            await reader.readexactly(content_length(head))
            statuses.append(status(head))
        assert statuses == [200, 200, 404]
        writer.close()


async def test_connections_over_the_cap_are_refused_before_tls_and_memory_stays_bounded() -> None:
    async with bounded_broker(max_connections=3, handshake_timeout=30.0) as broker:
        assert broker.management is not None and broker.management.listener is not None
        listener = broker.management.listener
        held = [await asyncio.open_connection("127.0.0.1", broker.http_port) for _ in range(3)]
        await wait_until(lambda: listener.connections == 3)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(100):
                reader, writer = await asyncio.open_connection("127.0.0.1", broker.http_port)
                await closed_within(reader, 2.0)  # at once, not after the 30 s handshake timeout
                writer.close()
                assert listener.connections == 3
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert grown < 100 * 64 * 1024, grown  # a TLS connection alone holds a 256 KiB buffer
        # a slot freed is a slot for the next client
        held[0][1].close()
        await wait_until(lambda: listener.connections == 2)
        reader, writer = await tls_open(broker)
        writer.write(get(broker))
        assert (await response_head(reader)).startswith(b"HTTP/1.1 200")
        writer.close()
        for _, w in held[1:]:
            w.close()


async def wait_until(condition: object, seconds: float = 5.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    "extra",
    [f"X-Big: {'x' * (MAX_HEADER_SIZE + 10)}\r\n", "".join(f"X-{i}: {i}\r\n" for i in range(MAX_HEADERS + 1))],
    ids=["a long field", "too many fields"],
)
async def test_a_header_over_the_limit_gets_400_and_the_connection_is_closed(extra: str) -> None:
    async with bounded_broker() as broker:
        reader, writer = await tls_open(broker)
        writer.write(get(broker, extra=extra))
        head = await response_head(reader)
        assert status(head) == 400, head
        await closed_within(reader, SLACK)
        writer.close()
        reader, writer = await tls_open(broker)  # the limit itself is fine
        writer.write(get(broker, extra="".join(f"X-{i}: {i}\r\n" for i in range(MAX_HEADERS - 4))))
        assert status(await response_head(reader)) == 200
        writer.close()


async def test_a_malformed_request_is_one_info_line_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    async with bounded_broker() as broker:
        with caplog.at_level(logging.DEBUG):
            for garbage in (b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"):
                reader, writer = await tls_open(broker)
                caplog.clear()
                writer.write(garbage)
                head = await response_head(reader)
                assert status(head) == 400, head
                await closed_within(reader, SLACK)
                writer.close()
                ours = [r for r in caplog.records if r.name == "amqplink.broker.http.bounds"]
                assert [r.levelno for r in ours] == [logging.INFO], caplog.text
                assert "malformed" in ours[0].getMessage()
                assert all(r.exc_info is None for r in caplog.records), caplog.text
                assert all(r.levelno < logging.WARNING for r in caplog.records), caplog.text


# -- fuzzing the request parser over a raw TLS socket -------------------------------------
@pytest.fixture(scope="module")
def served() -> Iterator[Broker]:
    with running_broker(http_port=0, handshake_timeout=FUZZ_T) as broker:
        yield broker


TOKEN = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=0, max_size=12)
REQUEST_LINE = st.one_of(
    st.builds(
        "{} {} {}".format,
        st.sampled_from(["GET", "PUT", "DELETE", "POST", "G\x00T", "", "get"]) | TOKEN,
        st.sampled_from(["/", "/q", "/$Resources/queues", "/t/subscriptions/s/rules/r", "*"]) | TOKEN,
        st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/9.9", "HTTP/1.1 x", ""]) | TOKEN,
    ),
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
)
HEADER = st.one_of(
    st.builds(
        "{}: {}".format, st.sampled_from(["Host", "Content-Length", "Transfer-Encoding", "Expect"]) | TOKEN, TOKEN
    ),
    st.sampled_from(["Content-Length: -1", "Content-Length: 99999999999", "Transfer-Encoding: chunked", "X"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(REQUEST_LINE, st.lists(HEADER, max_size=5), st.binary(max_size=64), st.sampled_from(["\r\n", "\n"]))
def test_fuzzed_requests_get_a_4xx_or_a_close_never_a_500_or_an_error_log(
    served: Broker, caplog: pytest.LogCaptureFixture, line: str, headers: list[str], body: bytes, eol: str
) -> None:
    data = (eol.join([line, *headers]) + eol + eol).encode("latin-1", "replace") + body
    caplog.clear()
    with caplog.at_level(logging.INFO):
        raw = socket.create_connection(("127.0.0.1", served.http_port), timeout=10)
        with tls_context(served).wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            answer = b""
            try:
                sock.sendall(data)
                # until an answer's head or the close (at the latest at the deadline: an incomplete request)
                while b"\r\n\r\n" not in answer and (chunk := sock.recv(65536)):
                    answer += chunk
            except (ConnectionError, ssl.SSLError):
                pass  # closed by the server: an answer to a request it could not read
    if answer:
        assert 400 <= status(answer) < 500, answer[:200]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text


async def test_xml_in_an_unknown_encoding_is_400_with_the_xml_layers_error(caplog: pytest.LogCaptureFixture) -> None:
    async with bounded_broker(handshake_timeout=20.0) as broker:
        body = b'<?xml version="1.0" encoding="x-bogus"?><entry xmlns="http://www.w3.org/2005/Atom"/>'
        reader, writer = await tls_open(broker)
        extra = f"Content-Length: {len(body)}\r\nContent-Type: application/atom+xml\r\n"
        with caplog.at_level(logging.INFO):
            writer.write(get(broker, "/q1", extra).replace(b"GET ", b"PUT ", 1) + body)
            head = await response_head(reader)
            detail = await reader.readexactly(content_length(head))
        assert status(head) == 400, head
        assert b"not well-formed XML: unknown encoding: x-bogus" in detail, detail
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text
        writer.close()


async def test_plain_http_or_garbage_on_the_tls_port_is_closed_without_an_error_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with bounded_broker() as broker:
        assert broker.management is not None and broker.management.listener is not None
        with caplog.at_level(logging.DEBUG):
            for garbage in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x16\x03\x01\x00\x05hello", b"\x00" * 64):
                reader, writer = await asyncio.open_connection("127.0.0.1", broker.http_port)
                writer.write(garbage)
                await closed_within(reader, SLACK)  # at once: the TLS handshake fails
                writer.close()
        await wait_until(lambda: broker.management.listener.connections == 0)  # type: ignore[union-attr]
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info], caplog.text
