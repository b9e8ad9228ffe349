"""Drop-in parity of the Service Bus client with azure-servicebus 7.15 (issue 24, part A):
retry_total=0, credentials by protocol, the exception hierarchy, and the smaller differences.
Each test names the SDK behaviour it follows (read in the SDK's source)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import pytest

from amqplink import Message
from amqplink.aio import connect
from amqplink.servicebus import (
    AmqpMessageBodyType,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageBatch,
    ServiceBusReceiveMode,
    ServiceBusReceiver,
    ServiceBusSender,
    ServiceBusSubQueue,
    parse_connection_string,
)
from amqplink.servicebus import aio as sb_aio
from amqplink.servicebus.cbs import CBS_NODE, CbsAuthorizer
from amqplink.servicebus.exceptions import (
    MessageAlreadySettled,
    ServiceBusAuthenticationError,
    ServiceBusConnectionError,
    ServiceBusError,
    ServiceBusServerBusyError,
)
from amqplink.servicebus.sas import AccessToken, generate_sas_token
from tests.responder import Responder
from tests.servicebus.scenario import BrokerThread, broker

__all__ = ["broker"]

AUDIENCE = "sb://127.0.0.1/orders"


def _busy(broker: BrokerThread, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    from amqplink.broker.namespace.errors import EntityError

    refusals: list[float] = []

    def busy(*args: Any, **kwargs: Any) -> None:
        refusals.append(time.monotonic())
        raise EntityError("com.microsoft:server-busy", "the namespace is busy (test)")

    monkeypatch.setattr(broker.broker.namespace.router, "send", busy)  # (what the connections call)
    return refusals


# -- A.8: retry_total=0 ---------------------------------------------------------------------
@pytest.mark.parametrize("shape", ["session", "gathered"])
async def test_retry_total_zero_sends_once_on_every_path(
    broker: BrokerThread, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """SDK ``_do_retryable_operation``: ``while retried_times <= retry_total`` -- with 0, one
    attempt. The session path and single sends gathered from concurrent tasks (the fast
    paths besides a plain send, which test_send_receive_edges covers) transfer once."""
    async with (
        sb_aio.ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client,
        client.get_queue_sender("sessions" if shape == "session" else "plain") as sender,
    ):
        refusals = _busy(broker, monkeypatch)
        if shape == "session":
            with pytest.raises(ServiceBusServerBusyError):
                await sender.send_messages(ServiceBusMessage("x", session_id="s"))
            assert len(refusals) == 1
        else:
            results = await asyncio.gather(
                *(sender.send_messages(ServiceBusMessage(f"m{i}")) for i in range(3)), return_exceptions=True
            )
            assert all(isinstance(r, ServiceBusServerBusyError) for r in results)
            assert len(refusals) <= 3  # a batch or its members alone, never a second round


def test_retry_total_zero_blocking_sends_once(broker: BrokerThread, monkeypatch: pytest.MonkeyPatch) -> None:
    with (
        ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client,
        client.get_queue_sender("plain") as sender,
    ):
        refusals = _busy(broker, monkeypatch)
        with pytest.raises(ServiceBusServerBusyError):
            sender.send_messages(ServiceBusMessage("x"))
        assert len(refusals) == 1


# -- A.1: credentials by protocol ------------------------------------------------------------
class StubTokenCredential:
    """A token credential as azure-identity's: ``get_token(*scopes)`` -> ``.token``/``.expires_on``."""

    def __init__(self, lifetime: float = 3600) -> None:
        self.scopes: list[tuple[str, ...]] = []
        self.lifetime = lifetime

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken(f"eyJ.fake-jwt-{len(self.scopes)}", int(time.time() + self.lifetime))


class AsyncStubTokenCredential(StubTokenCredential):
    """azure-identity's ``aio`` credentials: ``get_token`` is a coroutine function."""

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().get_token(*scopes)


def accept_all(node: str, request: Message) -> Message | None:
    assert node == CBS_NODE
    return Message(None, application_properties={"status-code": 202, "status-description": "Accepted"})


@pytest.mark.parametrize("credential_type", [StubTokenCredential, AsyncStubTokenCredential])
async def test_a_token_credential_puts_a_jwt_for_the_service_bus_scope_and_refreshes_it(
    credential_type: type[StubTokenCredential],
) -> None:
    """SDK ``create_authentication``: a credential without ``token_type`` is asked for
    ``JWT_TOKEN_SCOPE`` and its token put with type ``jwt`` under the entity's audience;
    refreshed before ``expires_on`` (pyamqp ``JWTTokenAuth``)."""
    from amqplink.servicebus.tokens import JWT_SCOPE, CredentialKind, credential_kind

    credential = credential_type(lifetime=2)
    assert credential_kind(credential) is CredentialKind.TOKEN
    async with Responder(accept_all) as responder, await connect(responder.url) as conn:
        cbs = CbsAuthorizer(conn, credential)
        token = await cbs.authorize(AUDIENCE)
        await responder.wait_until(lambda: len(responder.requests) >= 2, timeout=5)
        await cbs.close()
    first, second = (r for _, r in responder.requests[:2])
    assert credential.scopes[:2] == [(JWT_SCOPE,), (JWT_SCOPE,)]
    props = first.application_properties or {}
    assert (props["type"], props["name"], first.body) == ("jwt", AUDIENCE, token.token)
    assert second.body != first.body  # a fresh token from the credential


async def test_a_token_credential_with_a_sas_token_type_is_asked_for_the_audience() -> None:
    """The SDK's own ``ServiceBusSharedKeyCredential`` says ``token_type`` is the SAS type:
    ``get_token(auth_uri)`` and the SAS type on the put."""

    class SharedKey(StubTokenCredential):
        token_type = b"servicebus.windows.net:sastoken"

    credential = SharedKey()
    async with Responder(accept_all) as responder, await connect(responder.url) as conn:
        cbs = CbsAuthorizer(conn, credential)
        await cbs.authorize(AUDIENCE)
        await cbs.close()
    assert credential.scopes == [(AUDIENCE,)]
    assert (responder.requests[0][1].application_properties or {})["type"] == "servicebus.windows.net:sastoken"


def test_anything_without_a_token_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="get_token"):
        sb_aio.ServiceBusClient("ns.servicebus.windows.net", "a connection string is not a credential")


async def test_a_jwt_credential_works_on_a_broker_without_auth_and_is_refused_clearly_with_it() -> None:
    """The broker cannot verify a Microsoft Entra ID token: without ``require_auth`` it takes it
    unverified (no more than no token gives); with it, 401 and a message that says what to use."""
    for strict in (False, True):
        host = BrokerThread(require_auth=strict)
        try:
            namespace = f"127.0.0.1:{host.broker.port}"
            async with sb_aio.ServiceBusClient(
                namespace, StubTokenCredential(), use_tls=False, retry_total=0
            ) as client:
                sender = client.get_queue_sender("plain")
                if strict:
                    with pytest.raises(ServiceBusAuthenticationError, match="jwt") as info:
                        await sender.send_messages(ServiceBusMessage("x"))
                    assert "SAS key" in str(info.value) and info.value.status_code == 401
                else:
                    await sender.send_messages(ServiceBusMessage("via jwt"))
                    async with client.get_queue_receiver("plain", max_wait_time=5) as receiver:
                        (got,) = await receiver.receive_messages(max_wait_time=5)
                        assert str(got) == "via jwt"
                        await receiver.complete_message(got)
                await sender.close()
        finally:
            host.stop()


@pytest.mark.sdk
@pytest.mark.parametrize("kind", ["named_key", "sas"])
def test_azure_core_credentials_work_on_a_strict_broker(kind: str) -> None:
    """azure-core's ``AzureNamedKeyCredential`` (``.named_key``) and ``AzureSasCredential``
    (``.signature``), as the SDK takes them (``BaseHandler.__init__``); the SAS token is
    signed for ``sb://host:port/`` -- the audience keeps the port, as the SDK's
    ``_auth_uri`` does without TLS."""
    from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential

    strict = BrokerThread(require_auth=True)
    try:
        parsed = parse_connection_string(strict.connection_string)
        assert parsed.shared_access_key_name and parsed.shared_access_key
        namespace = f"127.0.0.1:{strict.broker.port}"
        credential: Any = AzureNamedKeyCredential(parsed.shared_access_key_name, parsed.shared_access_key)
        if kind == "sas":
            token = generate_sas_token(
                f"sb://{namespace}/", parsed.shared_access_key_name, parsed.shared_access_key, int(time.time()) + 600
            )
            credential = AzureSasCredential(token)
        with ServiceBusClient(namespace, credential, use_tls=False, retry_total=0) as client:
            assert client.fully_qualified_namespace == namespace
            with client.get_queue_sender("plain") as sender:
                assert sender.fully_qualified_namespace == namespace
                sender.send_messages(ServiceBusMessage(kind))
            with client.get_queue_receiver("plain", max_wait_time=5) as receiver:
                (got,) = receiver.receive_messages(max_wait_time=5)
                assert str(got) == kind
                receiver.complete_message(got)
    finally:
        strict.stop()


# -- A.5: exceptions -----------------------------------------------------------------------------
@pytest.mark.sdk
def test_errors_are_azure_errors_with_the_sdks_attributes() -> None:
    """The SDK's ``ServiceBusError(AzureError)``: ``except AzureError`` catches it; azure-core's
    ``inner_exception``/``message``/``exc_*`` and the SDK's ``_retryable``/``_condition``/
    ``_status_code``/``_shutdown_handler``. ``MessageAlreadySettled`` is a ValueError only."""
    from azure.core.exceptions import AzureError
    from azure.servicebus import exceptions as sdk

    from amqplink.servicebus import exceptions as ours_module

    cause = OSError("socket closed")
    try:
        try:
            raise cause
        except OSError as exc:
            raise ServiceBusConnectionError(
                description="link lost", condition="amqp:link:detach-forced", error=exc
            ) from exc
    except AzureError as caught:
        error: Any = caught
    assert isinstance(error, ServiceBusError)
    assert error.inner_exception is cause and error.exc_type is OSError and error.exc_value is cause
    assert "link lost" in error.message and error.message == str(error)
    assert (error.retryable, error._retryable, error._condition) == (True, True, "amqp:link:detach-forced")
    assert error.reason == "link lost" and error._status_code is None and error._shutdown_handler is True
    assert error.continuation_token is None
    assert not isinstance(MessageAlreadySettled(), AzureError | ServiceBusError)
    assert isinstance(MessageAlreadySettled(), ValueError)
    # the SDK's names, each on the same side of AzureError as the SDK's; ours beyond the SDK's
    # (transactions, which it lacks) are ServiceBusErrors, so AzureErrors too
    for name in ours_module.__all__:
        ours = getattr(ours_module, name)
        if hasattr(sdk, name):
            assert issubclass(ours, AzureError) == issubclass(getattr(sdk, name), AzureError), name
        else:
            assert issubclass(ours, ServiceBusError), name
    assert ServiceBusServerBusyError()._shutdown_handler is False  # as the SDK's


# -- A.7: smaller differences -------------------------------------------------------------------
async def test_a_session_message_goes_without_a_partition_key(broker: BrokerThread) -> None:
    """The SDK sets ``x-opt-partition-key`` only from ``partition_key`` (its ``session_id``
    setter writes group-id alone), so a receiver sees ``partition_key`` None."""
    message = ServiceBusMessage("s", session_id="s1")
    async with sb_aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("sessions") as sender:
            await sender.send_messages(message)
        assert message.partition_key is None
        async with client.get_queue_receiver("sessions", session_id="s1", max_wait_time=5) as receiver:
            (got,) = await receiver.receive_messages(max_wait_time=5)
            assert (got.session_id, got.partition_key) == ("s1", None)
            await receiver.complete_message(got)


async def test_session_is_none_on_a_receiver_without_one_and_entity_path_names_the_path(
    broker: BrokerThread,
) -> None:
    """SDK ``ServiceBusReceiver.session``: "it would return None if called on a non-sessionful
    receiver"; ``entity_path`` is ``topic/Subscriptions/sub`` (``ReceiverMixin``)."""
    async with sb_aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        receiver = client.get_subscription_receiver("events", "all")
        assert receiver.session is None
        assert receiver.entity_path == "events/Subscriptions/all"
        assert receiver.fully_qualified_namespace == f"127.0.0.1:{broker.broker.port}"
    with ServiceBusClient.from_connection_string(broker.connection_string) as blocking:
        queue_receiver = blocking.get_queue_receiver("plain")
        assert queue_receiver.session is None and queue_receiver.entity_path == "plain"
        assert blocking.get_queue_sender("plain").fully_qualified_namespace == blocking.fully_qualified_namespace


def test_unknown_message_keywords_are_ignored_and_a_naive_schedule_reads_back_as_given() -> None:
    """SDK ``ServiceBusMessage.__init__(..., **kwargs)`` ignores keywords it does not know (the
    old ``label``); ``scheduled_enqueue_time_utc`` is stored as set and read back so (its
    getter returns the annotation when it is not a number)."""
    naive = dt.datetime(2030, 1, 2, 3, 4, 5, 678901)
    message = ServiceBusMessage("x", label="old-name", scheduled_enqueue_time_utc=naive)  # type: ignore[call-arg]
    assert message.scheduled_enqueue_time_utc == naive and message.scheduled_enqueue_time_utc.tzinfo is None
    decoded = Message.decode(message.amqplink_message.encode())  # on the wire: the timestamp, as UTC
    stamp = (decoded.message_annotations or {})[next(iter(decoded.message_annotations or {}))]
    assert int(stamp) == int(naive.replace(tzinfo=dt.UTC).timestamp() * 1000)


def test_enums_print_as_the_sdks() -> None:
    """The SDK's enums are ``str, Enum``: ``str()`` gives ``Class.MEMBER``; they equal their values."""
    assert str(ServiceBusReceiveMode.PEEK_LOCK) == "ServiceBusReceiveMode.PEEK_LOCK"
    assert str(ServiceBusSubQueue.DEAD_LETTER) == "ServiceBusSubQueue.DEAD_LETTER"
    assert str(AmqpMessageBodyType.DATA) == "AmqpMessageBodyType.DATA"
    assert ServiceBusReceiveMode.PEEK_LOCK == "peeklock" and ServiceBusReceiveMode("PEEK_LOCK").value == "peeklock"


def test_a_batch_counts_its_size_as_the_sdk() -> None:
    """SDK ``ServiceBusMessageBatch``: an empty batch is 0 bytes; each message adds its encoded
    size plus 5 bytes of overhead (8 from 256 bytes on)."""
    batch = ServiceBusMessageBatch()
    assert batch.size_in_bytes == 0
    small, large = ServiceBusMessage("x"), ServiceBusMessage(b"y" * 1000)
    batch.add_message(small)
    batch.add_message(large)
    expected = len(small.amqplink_message.encode()) + 5 + len(large.amqplink_message.encode()) + 8
    assert batch.size_in_bytes == expected


def test_auto_lock_renewer_close_takes_wait() -> None:
    """SDK ``AutoLockRenewer.close(wait=True)``: ``wait=False`` does not block on the pool."""
    from concurrent.futures import ThreadPoolExecutor

    from amqplink.servicebus import AutoLockRenewer

    pool = ThreadPoolExecutor(1)
    renewer = AutoLockRenewer(executor=pool)
    renewer.close(wait=False)
    with pytest.raises(RuntimeError):  # shut down, as the SDK shuts its pool down
        pool.submit(int)
    AutoLockRenewer().close(wait=True)


def test_handlers_constructed_directly_as_the_sdks(broker: BrokerThread) -> None:
    """SDK ``ServiceBusSender(fully_qualified_namespace, credential, queue_name=...)`` and
    ``ServiceBusReceiver(..., queue_name=...)``: each opens a connection of its own."""
    parsed = parse_connection_string(broker.connection_string)
    from amqplink.servicebus import AzureNamedKeyCredential

    assert parsed.shared_access_key_name and parsed.shared_access_key
    credential = AzureNamedKeyCredential(parsed.shared_access_key_name, parsed.shared_access_key)
    namespace = f"127.0.0.1:{broker.broker.port}"
    with ServiceBusSender(namespace, credential, queue_name="other", use_tls=False) as sender:
        sender.send_messages(ServiceBusMessage("direct"))
    with ServiceBusReceiver(namespace, credential, queue_name="other", use_tls=False, max_wait_time=5) as receiver:
        (got,) = receiver.receive_messages(max_wait_time=5)
        assert str(got) == "direct" and receiver.entity_path == "other"
        receiver.complete_message(got)
    assert receiver._aio._owner is None  # its own connection was closed with it
    with pytest.raises(ValueError, match="queue_name or topic_name"):
        ServiceBusSender(namespace, credential, use_tls=False)


async def test_a_closing_receiver_releases_what_it_prefetched(broker: BrokerThread) -> None:
    """SDK ``ServiceBusReceiver._close_handler``: buffered messages are released on close "so
    they are not left locked at the broker until lock expiry (delaying redelivery, inflating
    delivery count)"; a release counts no attempt. The message handed out stays locked."""
    async with sb_aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("locks") as sender:
            await sender.send_messages([ServiceBusMessage(f"p{i}") for i in range(3)])
        async with client.get_queue_receiver("locks", prefetch_count=10) as first:
            (handed,) = await first.receive_messages(max_message_count=1, max_wait_time=5)
            link = first._link
            assert link is not None
            deadline = time.monotonic() + 5
            while link.buffered < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)  # the prefetched two arrive
            assert link.buffered == 2
        async with client.get_queue_receiver("locks") as second:
            got = await second.receive_messages(max_message_count=3, max_wait_time=1)
            assert sorted(str(m) for m in got) == sorted(f"p{i}" for i in range(3) if f"p{i}" != str(handed))
            assert all(m.delivery_count == 0 for m in got)
            for m in got:
                await second.complete_message(m)


# -- A.4: listing sessions -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["amqplink", pytest.param("azure", marks=pytest.mark.sdk)])
async def test_list_queue_sessions_pages_the_ids_with_messages_or_state(broker: BrokerThread, name: str) -> None:
    """SDK ``list_queue_sessions``: "session IDs with active messages or stored session state";
    with ``state_updated_after``, those whose state was set after it. Pages of 100 over
    ``com.microsoft:get-message-sessions``: 150 sessions need two."""
    from tests.servicebus.scenario import load_api

    api = load_api(name)
    ids = [f"s{i:03d}" for i in range(150)]
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("sessions") as sender:
            await sender.send_messages([api.sb.ServiceBusMessage("x", session_id=sid) for sid in ids])
        before_state = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        async with client.get_queue_receiver("sessions", session_id="s000") as receiver:
            (only,) = await receiver.receive_messages(max_wait_time=5)
            await receiver.complete_message(only)  # s000 keeps no message ...
            await receiver.session.set_state(b"but state")  # ... and is listed for its state
        listed = [sid async for sid in client.list_queue_sessions("sessions")]
        assert sorted(listed) == ids
        updated = [sid async for sid in client.list_queue_sessions("sessions", state_updated_after=before_state)]
        assert updated == ["s000"]
    with api.sb.ServiceBusClient.from_connection_string(broker.connection_string) as blocking:
        assert sorted(blocking.list_queue_sessions("sessions")) == ids
        assert list(blocking.list_queue_sessions("sessions", state_updated_after=dt.datetime.now(dt.UTC))) == []


@pytest.mark.parametrize("name", ["amqplink", pytest.param("azure", marks=pytest.mark.sdk)])
async def test_list_queue_sessions_by_page(broker: BrokerThread, name: str) -> None:
    """The SDK's ``list_queue_sessions`` is an ``ItemPaged``: ``by_page()`` gives pages of 100 and,
    after each, the continuation token (the count to skip, as text; None after the last), and a
    token given back resumes there; blocking and asyncio alike, with either library."""
    from tests.servicebus.scenario import load_api

    api = load_api(name)
    ids = [f"s{i:03d}" for i in range(150)]
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("sessions") as sender:
            await sender.send_messages([api.sb.ServiceBusMessage("x", session_id=sid) for sid in ids])
        pages = client.list_queue_sessions("sessions").by_page()
        seen = []
        async for page in pages:
            seen.append(([sid async for sid in page], pages.continuation_token))
        assert [len(page) for page, _ in seen] == [100, 50] and [token for _, token in seen] == ["100", None]
        assert sorted(sid for page, _ in seen for sid in page) == ids
        resumed = [sid async for page in client.list_queue_sessions("sessions").by_page("100") async for sid in page]
        assert resumed == seen[1][0]
    with api.sb.ServiceBusClient.from_connection_string(broker.connection_string) as blocking:
        pages = blocking.list_queue_sessions("sessions").by_page()
        blocking_pages = [(list(page), pages.continuation_token) for page in pages]
        assert blocking_pages == seen
        assert [sid for page in blocking.list_queue_sessions("sessions").by_page("100") for sid in page] == resumed


@pytest.mark.sdk
@pytest.mark.parametrize(
    "endpoint",
    [
        "sb://localhost:5673;UseDevelopmentEmulator=true",
        "sb://localhost;UseDevelopmentEmulator=true",
        "sb://contoso.servicebus.windows.net/",
        "sb://contoso.servicebus.windows.net:5671/",
    ],
)
def test_the_namespace_is_named_as_the_sdk_names_it(endpoint: str) -> None:
    """SDK ``strip_protocol_from_uri(..., strip_port=use_tls)``: "Keep the port for the non-TLS
    emulator; strip scheme/port/path otherwise" (no connection is opened)."""
    from azure.servicebus import ServiceBusClient as SdkClient

    head, _, tail = endpoint.partition(";")
    conn_str = f"Endpoint={head};SharedAccessKeyName=k;SharedAccessKey=v" + (f";{tail}" if tail else "")
    expected = SdkClient.from_connection_string(conn_str).fully_qualified_namespace
    with ServiceBusClient.from_connection_string(conn_str) as ours:
        assert ours.fully_qualified_namespace == expected
        assert ours.get_queue_receiver("q").fully_qualified_namespace == expected
