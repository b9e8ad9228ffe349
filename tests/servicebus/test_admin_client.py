"""amqplink's ServiceBusAdministrationClient (blocking and asyncio) runs the official management
samples' scenarios against the embedded broker, and what it sends and reads is checked on its own."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.atom.values import key_values_xml, read_key_values
from amqplink.atom.xmlsafe import parse_xml
from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig
from amqplink.servicebus import management
from amqplink.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdmin
from amqplink.servicebus.credentials import AzureNamedKeyCredential, AzureSasCredential
from amqplink.servicebus.management import (
    ClientAuthenticationError,
    QueueProperties,
    ResourceNotFoundError,
    ServiceBusAdministrationClient,
    ServiceRequestError,
    _xml,
)
from amqplink.servicebus.sas import generate_sas_token
from tests.broker.sdkutil import running_broker
from tests.servicebus import admin_scenarios
from tests.servicebus.admin_util import KEY, KEY_NAME, admin_connection_string, sender


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(BrokerConfig(), http_port=0) as broker:
        yield broker


@pytest.mark.parametrize("sample", ["queue", "topic", "subscription", "rule", "namespace", "invalid input"])
def test_samples_blocking(broker: Broker, sample: str) -> None:
    """Each management sample's scenario, with the blocking client: its own assertions hold."""
    with ServiceBusAdministrationClient.from_connection_string(
        admin_connection_string(broker), connection_verify=broker.http_ca
    ) as client:
        scenario = admin_scenarios.scenarios("ours-sync", management)[sample]
        record = admin_scenarios.run_sync(scenario, client, sender(broker), "ours-sync")
    assert record, "the scenario made no call"


@pytest.mark.parametrize("sample", ["queue", "topic", "subscription", "rule", "namespace", "invalid input"])
def test_samples_asyncio_match_blocking(broker: Broker, sample: str) -> None:
    """The asyncio client runs the same scenarios and every call gives what the blocking one gave."""

    async def run() -> list[tuple[str, object]]:
        async with AsyncAdmin.from_connection_string(
            admin_connection_string(broker), connection_verify=broker.http_ca
        ) as client:
            scenario = admin_scenarios.scenarios("ours-aio", management)[sample]
            return await admin_scenarios.run_async(scenario, client, sender(broker), "ours-aio")

    with ServiceBusAdministrationClient.from_connection_string(
        admin_connection_string(broker), connection_verify=broker.http_ca
    ) as client:
        scenario = admin_scenarios.scenarios("ours-cmp", management)[sample]
        blocking = admin_scenarios.run_sync(scenario, client, sender(broker), "ours-cmp")
    assert asyncio.run(run()) == blocking


def test_named_key_and_sas_credentials(broker: Broker) -> None:
    """``(fully_qualified_namespace, credential)``: a named key, a ready-made SAS token; a wrong key is 401."""
    fqns = f"127.0.0.1:{broker.http_port}"
    with ServiceBusAdministrationClient(
        fqns, AzureNamedKeyCredential(KEY_NAME, KEY), connection_verify=broker.http_ca
    ) as client:
        assert client.get_namespace_properties().messaging_sku == "Standard"
    token = generate_sas_token(f"https://{fqns}", KEY_NAME, KEY, int(dt.datetime.now().timestamp()) + 600)
    with ServiceBusAdministrationClient(fqns, AzureSasCredential(token), connection_verify=broker.http_ca) as client:
        client.create_queue("cred-q")
        assert client.get_queue("cred-q").name == "cred-q"
        client.delete_queue("cred-q")
    with ServiceBusAdministrationClient(
        fqns, AzureNamedKeyCredential(KEY_NAME, "not-the-key"), connection_verify=broker.http_ca
    ) as client:
        with pytest.raises(ClientAuthenticationError) as info:
            client.get_queue("cred-q")
        assert info.value.status_code == 401 and "SAS_KEY_VALUE" not in str(info.value)


def test_errors_and_input_checks(broker: Broker) -> None:
    """404 names the entity; a bad argument fails before any request; no server: ServiceRequestError."""
    with ServiceBusAdministrationClient.from_connection_string(
        admin_connection_string(broker), connection_verify=broker.http_ca
    ) as client:
        with pytest.raises(ResourceNotFoundError, match="queue 'missing'") as info:
            client.get_queue_runtime_properties("missing")
        assert info.value.status_code == 404
        with pytest.raises(TypeError, match="unexpected keyword argument 'max_delivery'"):
            client.create_queue("q", max_delivery=3)
        with pytest.raises(TypeError, match="queue name must be a str"):
            client.get_queue(3)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="must not be empty"):
            client.delete_queue("")
        with pytest.raises(TypeError, match="QueueProperties or a mapping"):
            client.update_queue(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="expected an int"):
            client.create_queue("q", max_delivery_count="3")
        with pytest.raises(ValueError, match="not an ISO-8601 duration"):
            client.create_queue("q", lock_duration="forever")
    # a port nothing listens on (the HTTP port of a broker that stopped)
    with running_broker(BrokerConfig(), http_port=0) as gone:
        conn, ca = admin_connection_string(gone), gone.http_ca
    with pytest.raises(ValueError, match="cannot read the CA bundle"):
        ServiceBusAdministrationClient.from_connection_string(conn, connection_verify=ca)
    client = ServiceBusAdministrationClient.from_connection_string(conn, connection_verify=False, timeout=5)
    with client, pytest.raises(ServiceRequestError, match="no answer"):
        client.get_queue("q")


def test_api_version(broker: Broker) -> None:
    """``api_version=ApiVersion.V2017_04`` (as the mgmt_queue sample passes it) is the query's ``api-version``."""
    client = ServiceBusAdministrationClient.from_connection_string(
        admin_connection_string(broker), connection_verify=broker.http_ca, api_version=management.ApiVersion.V2017_04
    )
    with client:
        assert client._core.url_path(client._core.namespace()) == "/$namespaceinfo?api-version=2017-04"
        assert client.get_namespace_properties().namespace_type == "Messaging"


def test_update_from_a_mapping_and_paging(broker: Broker) -> None:
    """``update_queue`` takes a mapping of the properties; a list of more than a page (100) is complete."""
    with ServiceBusAdministrationClient.from_connection_string(
        admin_connection_string(broker), connection_verify=broker.http_ca
    ) as client:
        names = [f"page-{i:03d}" for i in range(105)]
        for name in names:
            client.create_queue(name)
        got = [q.name for q in client.list_queues() if q.name.startswith("page-")]
        assert got == names
        props = vars(client.get_queue("page-000"))
        client.update_queue({**props, "max_delivery_count": 2})
        assert client.get_queue("page-000").max_delivery_count == 2
        for name in names:
            client.delete_queue(name)


def test_importable_without_aiohttp() -> None:
    """The client packages import no aiohttp (the asyncio client imports it on its first request)."""
    code = (
        "import sys; sys.modules['aiohttp'] = None\n"
        "import amqplink.servicebus.management, amqplink.servicebus.aio.management\n"
        "assert 'aiohttp' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    import subprocess

    subprocess.run([sys.executable, "-c", code], check=True)


def test_queue_description_written_in_contract_order() -> None:
    """What create/update send: the settable elements in the data contract's order, None left out."""
    props = {f: None for f in QueueProperties.__dataclass_fields__ if f != "name"}
    with pytest.raises(TypeError):  # every property is a required keyword, as in the SDK
        QueueProperties("q")  # type: ignore[call-arg]
    props.update(max_delivery_count=3, lock_duration=dt.timedelta(seconds=30), forward_to="sb://h/x")
    body = _xml.properties_entry(QueueProperties("q", **props))
    desc = parse_xml(body)[0][0]
    assert [child.tag.rsplit("}", 1)[-1] for child in desc] == ["LockDuration", "MaxDeliveryCount", "ForwardTo"]
    assert [child.text for child in desc] == ["PT30S", "3", "sb://h/x"]


_values = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=20),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.datetimes(
        min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1), timezones=st.none() | st.just(dt.UTC)
    ),
    st.timedeltas(min_value=dt.timedelta(0), max_value=dt.timedelta(days=3650)).map(
        lambda d: dt.timedelta(microseconds=d // dt.timedelta(microseconds=1))
    ),
)


@given(st.dictionaries(st.text(alphabet="abcxyz@_", min_size=1, max_size=8), _values, max_size=6))
def test_key_values_round_trip(values: dict[str, object]) -> None:
    """Every value type a rule's properties or parameters may hold reads back equal, with its type."""
    node = parse_xml(key_values_xml("Parameters", values).encode())
    back = read_key_values(node, "Parameters")
    assert back == values
    assert [type(v) for v in back.values()] == [type(v) for v in values.values()]


def test_support_ordering_is_kept(broker: Broker) -> None:
    """A topic's ``SupportOrdering`` reads back as set (the SDK's own ``test_mgmt_topic_update_success``)."""
    with ServiceBusAdministrationClient.from_connection_string(
        admin_connection_string(broker), connection_verify=broker.http_ca
    ) as client:
        client.create_topic("unordered", support_ordering=False)
        try:
            topic = client.get_topic("unordered")
            assert topic.support_ordering is False
            topic.support_ordering = True
            client.update_topic(topic)
            assert client.get_topic("unordered").support_ordering is True
        finally:
            client.delete_topic("unordered")


def test_the_printed_connection_string_on_the_management_port(broker: Broker) -> None:
    """Issue 34 item 1: the string ``amqplink broker`` prints (``UseDevelopmentEmulator=true``), its
    port changed to the management port, went to ``http://`` and ignored ``connection_verify``:
    a traceback saying "no answer ... (RemoteDisconnected)". A CA bundle asks for TLS, so it
    works (as with the SDK's admin client, which speaks HTTPS whatever the string says); without
    one the plain HTTP request still fails, now saying what to pass; ``use_tls=False`` with a CA
    bundle is refused, as the Service Bus client refuses it."""
    printed = broker.connection_string
    assert printed.endswith(";UseDevelopmentEmulator=true")
    on_management_port = printed.replace(f":{broker.port};", f":{broker.http_port};")
    with ServiceBusAdministrationClient.from_connection_string(
        on_management_port, connection_verify=broker.http_ca
    ) as client:
        assert client.create_queue("printed-string").name == "printed-string"

    async def asyncio_client() -> int:
        async with AsyncAdmin.from_connection_string(on_management_port, connection_verify=broker.http_ca) as client:
            return (await client.get_queue_runtime_properties("printed-string")).active_message_count

    assert asyncio.run(asyncio_client()) == 0
    with (
        ServiceBusAdministrationClient.from_connection_string(on_management_port) as client,
        pytest.raises(ServiceRequestError) as info,
    ):
        client.get_queue("printed-string")
    assert str(info.value).startswith(f"queue 'printed-string': no answer from http://127.0.0.1:{broker.http_port} (")
    assert "pass connection_verify=CA_FILE" in str(info.value)
    without_flag = on_management_port.replace(";UseDevelopmentEmulator=true", "")
    with (
        ServiceBusAdministrationClient.from_connection_string(without_flag) as client,  # the system's CAs
        pytest.raises(ServiceRequestError, match=r"CERTIFICATE_VERIFY_FAILED.*pass connection_verify=CA_FILE"),
    ):
        client.get_queue("printed-string")
    with pytest.raises(ValueError, match="connection_verify is a TLS setting and use_tls=False"):
        ServiceBusAdministrationClient.from_connection_string(
            on_management_port, connection_verify=broker.http_ca, use_tls=False
        )
