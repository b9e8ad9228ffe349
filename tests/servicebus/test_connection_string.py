"""Connection strings: the documented forms parse; every malformed one names its fault."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.servicebus import ConnectionStringError, ServiceBusConnectionString, parse_connection_string

SECRET = "Zm9vYmFyU2VjcmV0S2V5VmFsdWU9"
AZURE = f"Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={SECRET}"


def test_azure_form() -> None:
    cs = parse_connection_string(AZURE)
    assert cs.fully_qualified_namespace == "contoso.servicebus.windows.net"
    assert (cs.port, cs.use_tls, cs.use_development_emulator) == (5671, True, False)
    assert (cs.shared_access_key_name, cs.shared_access_key) == ("Root", SECRET)
    assert cs.entity_path is None
    assert cs.amqp_url == "amqps://contoso.servicebus.windows.net:5671"
    assert cs.audience("q1") == "sb://contoso.servicebus.windows.net/q1"


def test_emulator_form_is_plain_amqp_on_5672() -> None:
    cs = parse_connection_string(
        "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
    )
    assert (cs.fully_qualified_namespace, cs.port, cs.use_tls) == ("localhost", 5672, False)
    assert cs.amqp_url == "amqp://localhost:5672"
    assert cs.endpoint.tls is False


def test_explicit_port_and_entity_path_and_case_insensitive_keys() -> None:
    cs = parse_connection_string(
        f"endpoint=sb://127.0.0.1:5673;SHAREDACCESSKEYNAME=n;sharedaccesskey={SECRET};"
        "entitypath=/orders/;usedevelopmentemulator=TRUE"
    )
    assert (cs.fully_qualified_namespace, cs.port, cs.use_tls) == ("127.0.0.1", 5673, False)
    assert cs.entity_path == "orders"
    assert cs.audience() == "sb://127.0.0.1/orders"


def test_ipv6_endpoint() -> None:
    cs = parse_connection_string(f"Endpoint=sb://[::1]:5673;SharedAccessKeyName=n;SharedAccessKey={SECRET}")
    assert (cs.fully_qualified_namespace, cs.port) == ("::1", 5673)
    assert cs.amqp_url == "amqps://[::1]:5673"
    assert cs.audience("q") == "sb://[::1]/q"


def test_tls_endpoint_with_port_keeps_it() -> None:
    cs = parse_connection_string(AZURE.replace("windows.net/", "windows.net:15671"))
    assert (cs.port, cs.use_tls) == (15671, True)


def test_shared_access_signature_form() -> None:
    sas = "SharedAccessSignature sr=sb%3A%2F%2Fh%2Fq&sig=abc%3D&se=1700000000&skn=Root"
    cs = parse_connection_string(f"Endpoint=sb://h/;SharedAccessSignature={sas}")
    assert cs.shared_access_signature == sas
    assert cs.shared_access_key is None and cs.shared_access_key_name is None
    assert "abc" not in repr(cs)


def test_unknown_settings_ignored_as_the_sdk_does() -> None:
    assert parse_connection_string(AZURE + ";TransportType=AmqpWebSockets").port == 5671


def test_key_hidden_in_repr_and_value_is_frozen_and_picklable() -> None:
    cs = parse_connection_string(AZURE)
    assert SECRET not in repr(cs) and SECRET not in str(cs)
    assert "contoso" in repr(cs)
    with pytest.raises(AttributeError):
        cs.port = 1  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(cs)) == cs


@pytest.mark.parametrize(
    ("conn_str", "names"),
    [
        ("", "empty"),
        ("   ;", "empty"),
        (f"Endpoint=sb://h/;{SECRET};SharedAccessKeyName=n", "segment 2"),
        (f"SharedAccessKeyName=n;SharedAccessKey={SECRET}", "no Endpoint"),
        (f"Endpoint=https://h/;SharedAccessKeyName=n;SharedAccessKey={SECRET}", "sb://"),
        (f"Endpoint=h.servicebus.windows.net;SharedAccessKeyName=n;SharedAccessKey={SECRET}", "sb://"),
        (f"Endpoint=sb://;SharedAccessKeyName=n;SharedAccessKey={SECRET}", "no host"),
        (f"Endpoint=sb://h:99999;SharedAccessKeyName=n;SharedAccessKey={SECRET}", "port"),
        (f"Endpoint=sb://h:0;SharedAccessKeyName=n;SharedAccessKey={SECRET}", "port 0"),
        (f"Endpoint=sb://h/q;SharedAccessKeyName=n;SharedAccessKey={SECRET}", "EntityPath"),
        (f"Endpoint=sb://u:p@h;SharedAccessKeyName=n;SharedAccessKey={SECRET}", "user information"),
        (f"Endpoint=sb://h;SharedAccessKey={SECRET}", "both SharedAccessKeyName"),
        ("Endpoint=sb://h;SharedAccessKeyName=n", "both SharedAccessKeyName"),
        ("Endpoint=sb://h", "neither"),
        (f"Endpoint=sb://h;SharedAccessKeyName=n;SharedAccessKey={SECRET};SharedAccessSignature=x", "not both"),
        (f"Endpoint=sb://h;Endpoint=sb://g;SharedAccessKeyName=n;SharedAccessKey={SECRET}", "Endpoint more than once"),
        (f"Endpoint=sb://h;SharedAccessKeyName=;SharedAccessKey={SECRET}", "SharedAccessKeyName in the"),
        (f"Endpoint=sb://h;SharedAccessKeyName=n;SharedAccessKey={SECRET};EntityPath=/", "EntityPath"),
        (f"Endpoint=sb://h;SharedAccessKeyName=n;SharedAccessKey={SECRET};UseDevelopmentEmulator=yes", "true or"),
    ],
)
def test_errors_name_the_bad_part_and_never_the_key(conn_str: str, names: str) -> None:
    with pytest.raises(ConnectionStringError) as info:
        parse_connection_string(conn_str)
    assert names in str(info.value)
    assert SECRET not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_not_a_string() -> None:
    with pytest.raises(ConnectionStringError, match="must be a str"):
        parse_connection_string(b"Endpoint=sb://h")  # type: ignore[arg-type]


_PIECES = st.sampled_from(
    [
        "Endpoint=",
        "sb://",
        "h",
        ":",
        "5672",
        "/",
        ";",
        "=",
        "SharedAccessKeyName=",
        "SharedAccessKey=",
        "SharedAccessSignature=",
        "EntityPath=",
        "UseDevelopmentEmulator=",
        "true",
        "[",
        "]",
        "@",
        " ",
        "%",
        "\x00",
    ]
)


@given(st.one_of(st.text(), st.lists(st.one_of(_PIECES, st.text(max_size=4)), max_size=20).map("".join)))
def test_fuzz_only_our_error(conn_str: str) -> None:
    try:
        cs = parse_connection_string(conn_str)
    except ConnectionStringError:
        return
    assert isinstance(cs, ServiceBusConnectionString)
    assert 0 < cs.port < 65536 and cs.fully_qualified_namespace


@given(st.text(alphabet=st.characters(blacklist_characters=";= ", blacklist_categories=("Cs", "Z", "Cc")), min_size=8))
def test_fuzz_key_never_echoed(key: str) -> None:
    key += "="  # base64 padding, as real keys have
    for template in (
        "Endpoint=sb://h;SharedAccessKeyName=n;SharedAccessKey={k};UseDevelopmentEmulator=maybe",
        "Endpoint=ftp://h;SharedAccessKey={k}",
        "Endpoint=sb://h;{k}",
        "Endpoint=sb://h;SharedAccessSignature={k};SharedAccessKey=x;SharedAccessKeyName=n",
    ):
        try:
            parse_connection_string(template.format(k=key))
        except ConnectionStringError as exc:
            assert key.strip() not in str(exc)
