"""A token's audience must name this namespace (issue 23, item 7): a token signed with the
right key for another namespace's host is refused on ``$cbs``, ``$control`` and HTTPS,
whatever ``Host`` header comes with it; the names the official SDK uses still pass."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st
from proton.utils import LinkDetached

from amqplink.broker import Broker
from amqplink.broker.audience import NamespaceNames
from amqplink.broker.rights import AccessRules
from amqplink.broker.sbserver import EMULATOR_KEY, EMULATOR_KEY_NAME
from amqplink.commands.broker_fault import control_request
from amqplink.servicebus.sas import SasFailure, SasTokenError
from tests.broker.sdkutil import running_broker
from tests.broker.test_control import raw_request, status
from tests.broker.test_management import mint
from tests.broker.test_sb_auth import CbsClient, attach_receiver

OTHER = "sb://other-namespace.servicebus.windows.net/"
KEYS = {EMULATOR_KEY_NAME: EMULATOR_KEY}


@pytest.fixture(scope="module")
def strict() -> Iterator[Broker]:
    with running_broker(keys=KEYS, require_auth=True, http_port=0) as broker:
        yield broker


# -- the names, as a property ----------------------------------------------------------------
AMQP_PORT, HTTP_PORT, PUBLISHED = 5672, 8443, 5673
GIVEN = ("sb.example.com", f"localhost:{PUBLISHED}")
OWN_HOSTS = ("127.0.0.1", "localhost", "::1", "sb.example.com")
SCHEMES = ("sb://", "amqp://", "amqps://", "http://", "https://", "")
TRICKS = (
    "127.0.0.1.evil.com",
    "evil.com@127.0.0.1",
    "127.0.0.1@evil.com",
    f"127.0.0.1:{AMQP_PORT}@evil.com",
    "127.0.0.1%2f",
    "127.0.0.2",
    "localhost.",  # a trailing dot is the same name: allowed (see expected)
    "sb.example.com.evil",
    "other-namespace.servicebus.windows.net",
)


def names() -> NamespaceNames:
    own = NamespaceNames.of(GIVEN)
    own.listen("127.0.0.1", AMQP_PORT)
    own.ports.add(HTTP_PORT)
    return own


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and "@" not in host else host


@given(
    scheme=st.sampled_from((*SCHEMES, "ftp://", "sb:/", "sb:///")),
    host=st.sampled_from(OWN_HOSTS)
    | st.sampled_from(OWN_HOSTS).map(str.upper)
    | st.sampled_from(TRICKS)
    | st.from_regex(r"[a-z0-9][a-z0-9.-]{0,20}", fullmatch=True),
    port=st.none() | st.sampled_from((AMQP_PORT, HTTP_PORT, PUBLISHED, 1, 5671, 65535)),
    path=st.lists(st.from_regex(r"[A-Za-z0-9$._-]{1,8}", fullmatch=True), max_size=3).map("/".join),
    slash=st.booleans(),
)
@settings(max_examples=600, deadline=None)
def test_only_the_namespace_own_names_pass(scheme: str, host: str, port: int | None, path: str, slash: bool) -> None:
    audience = f"{scheme}{_bracket(host)}{'' if port is None else f':{port}'}/{path}{'/' if slash else ''}"
    normal = host.lower().rstrip(".")
    expected = (
        scheme in SCHEMES
        and "@" not in host
        and "%" not in host
        and (
            (normal in OWN_HOSTS and (port is None or port in (AMQP_PORT, HTTP_PORT)))
            or (normal == "localhost" and port == PUBLISHED)
        )
    )
    assert names().allows(audience) is expected, audience


def test_a_wildcard_listener_takes_the_address_a_connection_reached() -> None:
    own = NamespaceNames()
    own.listen("0.0.0.0", AMQP_PORT)
    assert own.allows("sb://localhost/q") and own.allows(f"sb://127.0.0.1:{AMQP_PORT}/q")
    assert not own.allows("sb://10.1.2.3/q")
    assert own.allows("sb://10.1.2.3/q", local=("10.1.2.3", AMQP_PORT))
    assert own.allows(f"sb://10.1.2.3:{AMQP_PORT}/q", local=("10.1.2.3", AMQP_PORT))
    assert not own.allows("sb://10.1.2.3:9999/q", local=("10.1.2.3", AMQP_PORT))


def test_a_bad_host_name_is_refused() -> None:
    with pytest.raises(ValueError, match="not a host name"):
        NamespaceNames.of(["sb://host/with/a/path"])


def test_verify_refuses_another_namespace_signed_with_the_same_key() -> None:
    rules = AccessRules.of(KEYS)
    now = time.time()
    assert rules.verify(mint(f"sb://127.0.0.1:{AMQP_PORT}/q"), now=now, names=names()).path == "q"
    with pytest.raises(SasTokenError) as info:
        rules.verify(mint(OTHER), now=now, names=names())
    assert info.value.reason is SasFailure.AUDIENCE_NOT_COVERED
    assert "other-namespace.servicebus.windows.net" in str(info.value)


# -- over the wire ---------------------------------------------------------------------------
@pytest.mark.parametrize("audience", [OTHER, "sb://127.0.0.1/q"])
def test_cbs_refuses_a_token_for_another_namespace(strict: Broker, audience: str) -> None:
    cbs = CbsClient(strict)
    try:
        status, description = cbs.put(mint(OTHER), audience)
        assert status == 401 and "namespace" in description
        with pytest.raises(LinkDetached) as info:
            attach_receiver(cbs.conn, "q")
        assert "amqp:unauthorized-access" in str(info.value)
        # the same key, for this namespace's own name (with its port, as the SDK writes it)
        own = f"sb://127.0.0.1:{strict.port}/q"
        assert cbs.put(mint(own), own)[0] == 202
        attach_receiver(cbs.conn, "q").close()
    finally:
        cbs.close()


async def test_control_refuses_a_token_for_another_namespace() -> None:
    async with Broker(servicebus=True, keys=KEYS, require_auth=True) as broker:
        answer = await raw_request(broker, {"operation": "list", "security_token": mint(OTHER)})
        code, description = status(answer)
        assert code == 401 and "other-namespace" in description
        # the same key for this namespace's root passes, and a root token put on $cbs for another does not
        own = mint(f"sb://127.0.0.1:{broker.port}/")
        assert status(await raw_request(broker, {"operation": "list", "security_token": own}))[0] == 200
        assert await control_request(f"amqp://127.0.0.1:{broker.port}", "list", key=EMULATOR_KEY) == []


def test_https_refuses_a_token_for_another_host_whatever_the_host_header(strict: Broker) -> None:
    url = f"https://127.0.0.1:{strict.http_port}/$Resources/queues"

    def get(audience: str, host: str | None = None) -> int:
        headers = {"Authorization": mint(audience)}
        if host is not None:
            headers["Host"] = host
        with requests.Session() as session:
            session.trust_env = False
            return session.get(url, headers=headers, verify=strict.http_ca, timeout=10).status_code

    assert get("https://evil/", host="evil") == 401
    assert get(OTHER, host="other-namespace.servicebus.windows.net") == 401
    assert get(f"https://127.0.0.1:{strict.http_port}/") == 200
    assert get(f"https://localhost:{strict.http_port}/") == 200  # a loopback name of its own


@pytest.mark.sdk
def test_sdk_with_the_emulator_style_connection_strings(strict: Broker) -> None:
    from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode

    mode = ServiceBusReceiveMode.RECEIVE_AND_DELETE
    for host in ("localhost", "127.0.0.1"):
        conn_str = (
            f"Endpoint=sb://{host}:{strict.port};SharedAccessKeyName={EMULATOR_KEY_NAME};"
            f"SharedAccessKey={EMULATOR_KEY};UseDevelopmentEmulator=true"
        )
        with ServiceBusClient.from_connection_string(conn_str) as client:
            with client.get_queue_sender("named") as sender:
                sender.send_messages(ServiceBusMessage(host))
            with client.get_queue_receiver("named", receive_mode=mode) as receiver:
                assert [str(m) for m in receiver.receive_messages(max_wait_time=5)] == [host]


@pytest.mark.sdk
def test_sdk_with_a_token_for_another_namespace_is_refused(strict: Broker) -> None:
    from azure.servicebus import ServiceBusClient, ServiceBusMessage
    from azure.servicebus.exceptions import ServiceBusAuthenticationError

    def conn_str(token: str) -> str:
        return f"Endpoint=sb://127.0.0.1:{strict.port};SharedAccessSignature={token};UseDevelopmentEmulator=true"

    refused = ServiceBusClient.from_connection_string(conn_str(mint(OTHER)), retry_total=0)
    with refused, pytest.raises(ServiceBusAuthenticationError), refused.get_queue_sender("sdk-aud") as sender:
        sender.send_messages(ServiceBusMessage("refused"))  # (the SDK keeps the broker's 401 text to itself)
    own = mint(f"sb://127.0.0.1:{strict.port}/")
    with ServiceBusClient.from_connection_string(conn_str(own)) as client, client.get_queue_sender("sdk-aud") as sender:
        sender.send_messages(ServiceBusMessage("signed for this namespace"))
    (only,) = strict.namespace.receiver_source("sdk-aud").peek(0, 10, time.time())
    assert only.sequence_number == 1  # the refused one never reached the queue
