"""The SDK's connection options ``user_agent``, ``logging_enable``, ``socket_timeout`` and
``client_identifier`` (issue 24, A.6), each as azure-servicebus 7.15 applies it (read in its
source: ``_common/_configuration.py``, ``_common/utils.create_properties``,
``_servicebus_receiver._create_handler``'s ``link_properties={CONSUMER_IDENTIFIER: self._name}``),
and what becomes of keywords neither knows (ignored, as the SDK's ``Configuration``)."""

from __future__ import annotations

import asyncio
import logging
import platform
import sys
from typing import Any

import pytest

from amqplink.aio.transport import EngineProtocol, SocketWriteTimeout
from amqplink.codec.types import Symbol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.servicebus import (
    AzureNamedKeyCredential,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusSender,
    parse_connection_string,
)
from amqplink.servicebus import aio as sb_aio
from amqplink.servicebus.exceptions import ServiceBusConnectionError
from tests.servicebus.scenario import BrokerThread, broker

__all__ = ["broker"]

RECEIVER_NAME = Symbol("com.microsoft:receiver-name")


def _remote(broker: BrokerThread) -> list[Any]:
    """What the broker saw of each client connection: (container-id, open properties, link attaches)."""

    async def read() -> list[Any]:
        host = broker.broker.servicebus
        assert host is not None
        seen = []
        for conn in host.connections:
            remote = conn.engine.remote_open
            links = [*conn.consumers, *conn.producers]
            seen.append((remote.container_id, remote.properties, links))
        return seen

    return list(broker.call(read()))


def _receiver_names(broker: BrokerThread) -> list[Any]:
    names = []
    for _container, _props, links in _remote(broker):
        for link in links:
            attach = link.remote_attach
            if attach is not None and attach.properties and RECEIVER_NAME in attach.properties:
                names.append(attach.properties[RECEIVER_NAME])
    return names


# -- user_agent -------------------------------------------------------------------------------
def test_user_agent_goes_in_front_of_the_built_in_one(broker: BrokerThread) -> None:
    """SDK ``create_properties``: open properties product, version, framework, platform,
    user-agent; "If specified, this will be added in front of the built-in user agent string"."""
    with (
        ServiceBusClient.from_connection_string(broker.connection_string, user_agent="orders-app/2") as client,
        client.get_queue_sender("plain") as sender,
    ):
        sender.send_messages(ServiceBusMessage("x"))
        ((_, props, _),) = _remote(broker)
    framework = f"Python/{sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}"
    assert set(props) == {"product", "version", "framework", "platform", "user-agent"}
    assert props[Symbol("framework")] == framework
    assert props[Symbol("platform")] == platform.platform()
    agent = props[Symbol("user-agent")]
    assert agent.startswith("orders-app/2 amqplink/") and agent.endswith(f"{framework} ({platform.platform()})")


@pytest.mark.sdk
def test_user_agent_properties_have_the_sdks_keys(broker: BrokerThread) -> None:
    """The same open-property keys as the SDK sends, the user's string first in both."""
    from azure.servicebus import ServiceBusClient as SdkClient
    from azure.servicebus import ServiceBusMessage as SdkMessage

    keys = []
    for client_class, message in ((SdkClient, SdkMessage), (ServiceBusClient, ServiceBusMessage)):
        with (
            client_class.from_connection_string(broker.connection_string, user_agent="ua-test") as client,
            client.get_queue_sender("plain") as sender,
        ):
            sender.send_messages(message("x"))
            ((_, props, _),) = _remote(broker)
        assert str(props[Symbol("user-agent")]).startswith("ua-test ")
        keys.append({str(k) for k in props})
    assert keys[0] == keys[1]


def test_user_agent_must_be_text() -> None:
    with pytest.raises(TypeError, match="user_agent must be a str"):
        sb_aio.ServiceBusClient.from_connection_string(
            "Endpoint=sb://127.0.0.1/;SharedAccessKeyName=k;SharedAccessKey=s", user_agent=7
        )


# -- logging_enable ---------------------------------------------------------------------------
def test_logging_enable_traces_this_clients_frames_only(broker: BrokerThread, caplog: pytest.LogCaptureFixture) -> None:
    """SDK: "logging_enable: Whether to output network trace logs to the logger" (per client):
    the traced client's frames are logged at INFO on amqplink.frames, the other client's not,
    and the SASL exchange's secrets never."""
    caplog.set_level(logging.INFO, logger="amqplink.frames")
    with (
        ServiceBusClient.from_connection_string(broker.connection_string, logging_enable=True) as traced,
        ServiceBusClient.from_connection_string(broker.connection_string) as quiet,
    ):
        with traced.get_queue_sender("plain") as sender:
            sender.send_messages(ServiceBusMessage("traced"))
        traced_ids = {c for c, _, _ in _remote(broker)}
        with quiet.get_queue_sender("other") as sender:
            sender.send_messages(ServiceBusMessage("quiet"))
        all_ids = {c for c, _, _ in _remote(broker)}
    frames = [r for r in caplog.records if r.name == "amqplink.frames"]
    assert frames and all(r.levelno == logging.INFO for r in frames)
    logged = " ".join(r.getMessage() for r in frames)
    assert "Attach(" in logged and "Transfer(" in logged
    (quiet_id,) = all_ids - traced_ids
    assert all(r.args and r.args[0] in traced_ids for r in frames)  # type: ignore[index]
    assert quiet_id not in logged
    key = broker.connection_string.split("SharedAccessKey=", 1)[1].split(";", 1)[0]
    assert key not in logged and "SharedAccessSignature" not in logged  # tokens travel in payloads, never logged


# -- client_identifier --------------------------------------------------------------------------
def test_client_identifier_names_the_receiver_and_the_links(broker: BrokerThread) -> None:
    """SDK: ``client_identifier`` default ``SBSender-<uuid>``/``SBReceiver-<uuid>``; a receiver
    sends it as the attach property ``com.microsoft:receiver-name``."""
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender("plain", client_identifier="billing-sender") as sender,
        client.get_queue_receiver("plain", client_identifier="billing-reader", max_wait_time=1) as receiver,
        client.get_queue_receiver("other", max_wait_time=1) as anonymous,
    ):
        sender.send_messages(ServiceBusMessage("x"))
        receiver.receive_messages(max_wait_time=1)
        anonymous.receive_messages(max_wait_time=0.2)
        assert sender.client_identifier == "billing-sender"
        assert receiver.client_identifier == "billing-reader"
        assert anonymous.client_identifier.startswith("SBReceiver-")
        assert sorted(_receiver_names(broker)) == sorted(["billing-reader", anonymous.client_identifier])
        ((_, _, links),) = _remote(broker)
        names = sorted(str(link.name) for link in links)
        assert any(n.startswith("billing-sender-") for n in names)
        assert any(n.startswith("billing-reader-") for n in names)


def test_client_identifier_is_the_container_id_of_a_handlers_own_connection(broker: BrokerThread) -> None:
    """pyamqp's ``client_name`` (the SDK passes the identifier) is the container-id: a handler
    constructed directly has a connection of its own, named so."""
    parsed = parse_connection_string(broker.connection_string)
    assert parsed.shared_access_key_name and parsed.shared_access_key
    credential = AzureNamedKeyCredential(parsed.shared_access_key_name, parsed.shared_access_key)
    namespace = f"127.0.0.1:{broker.broker.port}"
    with ServiceBusSender(
        namespace, credential, queue_name="plain", use_tls=False, client_identifier="own-conn"
    ) as sender:
        sender.send_messages(ServiceBusMessage("x"))
        assert [c for c, _, _ in _remote(broker)] == ["own-conn"]


@pytest.mark.parametrize("bad", ["", 7])
def test_client_identifier_must_be_text(broker: BrokerThread, bad: Any) -> None:
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        pytest.raises(ValueError, match="client_identifier must be a non-empty str"),
    ):
        client.get_queue_sender("plain", client_identifier=bad)


# -- socket_timeout -----------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1, float("inf"), "1", True])
def test_socket_timeout_must_be_a_positive_number(broker: BrokerThread, bad: Any) -> None:
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        pytest.raises(ValueError, match="socket_timeout must be a positive number"),
    ):
        client.get_queue_receiver("plain", socket_timeout=bad)
    with pytest.raises(ValueError, match="socket_timeout must be a positive number"):
        ServiceBusClient.from_connection_string(broker.connection_string, socket_timeout=bad)


async def test_wait_writable_is_bounded_by_the_timeout() -> None:
    """The mechanism: while the socket's buffer stays full, a bounded wait ends with
    SocketWriteTimeout (a ConnectionError); an unbounded one is woken by resume_writing."""

    class Stuck:
        aborted = False

        def is_closing(self) -> bool:
            return False

        def abort(self) -> None:
            self.aborted = True

    protocol = EngineProtocol(EngineConnection(), lambda events: None)
    stuck = Stuck()
    protocol.transport = stuck  # type: ignore[assignment]
    protocol.pause_writing()
    with pytest.raises(SocketWriteTimeout, match="socket_timeout"):
        await protocol.wait_writable(0.05)
    assert stuck.aborted  # as the SDK's transport: the connection ends
    waiter = asyncio.ensure_future(protocol.wait_writable())
    await asyncio.sleep(0)
    assert not waiter.done()
    protocol.resume_writing()
    await asyncio.wait_for(waiter, 1)


def test_socket_timeout_fails_a_send_the_peer_does_not_read(broker: BrokerThread) -> None:
    """SDK: "the time ... the underlying socket ... should wait when sending ... before timing
    out. If connection errors are occurring due to write timing out, a larger than default
    value may need to be passed in": the broker stops reading, a pipelined send fills the
    socket, and fails with ServiceBusConnectionError instead of waiting for ever."""
    with (
        ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client,
        client.get_queue_sender("plain", socket_timeout=0.3) as sender,
    ):
        sender.send_messages(ServiceBusMessage("attach first"))

        async def stop_reading() -> None:
            host = broker.broker.servicebus
            assert host is not None
            for conn in host.connections:
                conn.protocol.transport.pause_reading()

        broker.call(stop_reading())
        body = b"x" * 200_000
        with pytest.raises(ServiceBusConnectionError, match="socket_timeout"):
            sender.send_messages([ServiceBusMessage(body) for _ in range(400)], timeout=30)


# -- unknown keywords -----------------------------------------------------------------------------
def test_unknown_keywords_are_ignored_as_the_sdk_ignores_them(
    broker: BrokerThread, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK's ``Configuration(**kwargs)`` reads the keys it knows and ignores the rest; so
    do the client and ``get_queue_sender``/``get_queue_receiver`` (a DEBUG line names them)."""
    caplog.set_level(logging.DEBUG, logger="amqplink.servicebus.client_options")
    with ServiceBusClient.from_connection_string(broker.connection_string, no_such_option=1) as client:
        with client.get_queue_sender("plain", frobnicate=True) as sender:
            sender.send_messages(ServiceBusMessage("x"))
        with client.get_queue_receiver("plain", max_wait_time=1, wobble=2) as receiver:
            assert [str(m) for m in receiver.receive_messages(max_wait_time=2)] == ["x"]
    logged = caplog.text
    assert "no_such_option" in logged and "frobnicate" in logged and "wobble" in logged


def test_uamqp_transport_cannot_apply() -> None:
    """amqplink is its own AMQP stack: ``uamqp_transport=True`` is refused, never silently dropped."""
    with pytest.raises(ValueError, match="uamqp_transport=True cannot apply"):
        ServiceBusClient.from_connection_string(
            "Endpoint=sb://127.0.0.1/;SharedAccessKeyName=k;SharedAccessKey=s", uamqp_transport=True
        )


def test_a_connection_string_without_the_emulator_flag_to_a_plain_broker_says_what_to_add(
    broker: BrokerThread,
) -> None:
    """The broker prints its string with UseDevelopmentEmulator=true; one typed without it
    (say for a second --key rule) goes over TLS to a port that has none."""
    conn = broker.connection_string.replace(";UseDevelopmentEmulator=true", "")
    assert conn != broker.connection_string
    with (
        pytest.raises(ServiceBusConnectionError, match="put UseDevelopmentEmulator=true in the connection string"),
        ServiceBusClient.from_connection_string(conn, retry_total=0) as client,
        client.get_queue_sender("plain") as sender,
    ):
        sender.send_messages(ServiceBusMessage("over TLS?"))
