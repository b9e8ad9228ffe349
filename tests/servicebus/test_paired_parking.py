"""Parking (seed 001's property renames) and restoring, and the options value."""

from __future__ import annotations

import datetime as dt
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.message import Message
from amqplink.servicebus import PairedNamespaceOptions, ServiceBusMessage
from amqplink.servicebus.exceptions import MessageSizeExceededError
from amqplink.servicebus.message import X_OPT_ENQUEUED_TIME, X_OPT_LOCKED_UNTIL, X_OPT_SEQUENCE_NUMBER
from amqplink.servicebus.paired.options import namespace_label
from amqplink.servicebus.paired.parking import X_MS_PATH, X_MS_SESSIONID, X_MS_TIMETOLIVE, NotParkedError, park, restore

SECONDARY = "Endpoint=sb://backup.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=s3cr3t-key="


def received(message: ServiceBusMessage) -> Message:
    """What a receiver of the backlog queue gets: the broker's annotations added."""
    raw = Message.decode(message.amqplink_message.encode())
    anns = dict(raw.message_annotations or {})
    anns.update({X_OPT_SEQUENCE_NUMBER: 7, X_OPT_ENQUEUED_TIME: dt.datetime.now(dt.UTC), X_OPT_LOCKED_UNTIL: 1})
    raw.message_annotations = anns
    return raw


def test_session_ttl_and_destination_are_renamed_and_restored() -> None:
    original = ServiceBusMessage(
        "body",
        session_id="s-1",
        message_id="m-1",
        time_to_live=dt.timedelta(seconds=90),
        application_properties={"k": 1},
        subject="label",
        correlation_id="c",
        content_type="text/plain",
    )
    parked = park(original, "orders", 256 * 1024)
    assert parked.session_id is None and parked.time_to_live is None
    assert parked.application_properties == {
        "k": 1,
        X_MS_SESSIONID: "s-1",
        X_MS_TIMETOLIVE: 90_000,
        X_MS_PATH: "orders",
    }
    assert original.session_id == "s-1" and original.application_properties == {"k": 1}  # untouched
    destination, restored = restore(received(parked))
    assert destination == "orders"
    assert restored.session_id == "s-1" and restored.message_id == "m-1"
    assert restored.time_to_live == dt.timedelta(seconds=90)
    assert restored.application_properties == {"k": 1}
    assert (restored.subject, restored.correlation_id, restored.content_type) == ("label", "c", "text/plain")
    assert str(restored) == "body"
    anns = restored.amqplink_message.message_annotations or {}
    assert X_OPT_SEQUENCE_NUMBER not in anns and X_OPT_ENQUEUED_TIME not in anns


def test_a_session_message_with_its_partition_key_parks_without_either() -> None:
    original = ServiceBusMessage("x", session_id="s", partition_key="s")
    parked = park(original, "q", 256 * 1024)
    assert parked.partition_key is None and parked.session_id is None
    _, restored = restore(received(parked))
    assert restored.session_id == "s"


@given(
    st.text(min_size=1, max_size=40).filter(lambda s: "\x00" not in s),
    st.one_of(st.none(), st.text(min_size=1, max_size=20)),
    st.one_of(st.none(), st.integers(min_value=1, max_value=10**6)),
    st.dictionaries(
        st.text(min_size=1, max_size=8).filter(lambda k: not k.startswith("x-ms-")),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        max_size=4,
    ),
    st.binary(max_size=200),
)
def test_restore_undoes_park(
    entity: str, session: str | None, ttl: int | None, props: dict[str, int], body: bytes
) -> None:
    original = ServiceBusMessage(body, session_id=session, time_to_live=ttl, application_properties=props or None)
    destination, restored = restore(received(park(original, entity, 10**7)))
    assert destination == entity
    assert restored.session_id == session
    assert restored.time_to_live == (None if ttl is None else dt.timedelta(seconds=ttl))
    assert (restored.application_properties or {}) == props
    assert restored.message_id == original.message_id
    assert b"".join(restored.body) == body


def test_a_message_that_no_longer_fits_once_parked_is_refused() -> None:
    limit = 4096
    fits = ServiceBusMessage(b"x" * 3900)
    assert len(fits.amqplink_message.encode()) <= limit
    with pytest.raises(MessageSizeExceededError) as caught:
        park(fits, "a-rather-long-destination-entity-name/with/segments" * 4, limit)
    assert "larger than the backlog queue takes (4096 bytes)" in str(caught.value)
    assert caught.value.entity is not None and caught.value.entity.startswith("a-rather-long")


def test_a_message_without_x_ms_path_is_not_a_parked_one() -> None:
    with pytest.raises(NotParkedError, match="x-ms-path"):
        restore(ServiceBusMessage("stray").amqplink_message)


def test_options_are_a_picklable_value_without_the_key_in_repr() -> None:
    options = PairedNamespaceOptions(SECONDARY, backlog_queue_count=3, failover_interval=dt.timedelta(seconds=2))
    assert "s3cr3t" not in repr(options) and "SharedAccessKey" not in repr(options)
    assert "backup.servicebus.windows.net" in repr(options)
    copy = pickle.loads(pickle.dumps(options))
    assert copy == options and copy.failover_seconds == 2.0
    assert options.management_url == "https://backup.servicebus.windows.net/"
    assert options.ping_seconds == 60.0 and options.backlog_queue_count == 3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"backlog_queue_count": 0}, "backlog_queue_count"),
        ({"failover_interval": dt.timedelta(0)}, "failover_interval"),
        ({"ping_primary_interval": -1}, "ping_primary_interval"),
    ],
)
def test_bad_options_are_refused_at_construction(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PairedNamespaceOptions(SECONDARY, **kwargs)  # type: ignore[arg-type]


def test_a_malformed_secondary_string_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError) as caught:
        PairedNamespaceOptions("SharedAccessKey=s3cr3t;nonsense")
    assert "s3cr3t" not in str(caught.value)


def test_the_primary_namespace_label() -> None:
    assert namespace_label("contoso.servicebus.windows.net", 5671) == "contoso"
    assert namespace_label("127.0.0.1", 5672) == "127-0-0-1-5672"
    assert namespace_label("::1", 5672) == "1-5672"
    assert namespace_label("localhost", 1234) == "localhost-1234"


@given(
    st.text(min_size=1, max_size=300),
    st.one_of(st.none(), st.text(min_size=1, max_size=128)),
    st.one_of(st.none(), st.integers(min_value=1, max_value=4_294_967)),  # the header ttl: uint ms
    st.dictionaries(st.text(max_size=30), st.text(max_size=300), max_size=12),
    st.binary(max_size=600),
)
def test_the_size_limit_is_exact(
    entity: str, session: str | None, ttl: int | None, props: dict[str, str], body: bytes
) -> None:
    """A parked message that fits ``max_size`` exactly is taken; one byte less is refused
    (the shortcut that skips encoding never lets a larger message through)."""
    original = ServiceBusMessage(body, session_id=session, time_to_live=ttl, application_properties=props or None)
    size = len(park(original, entity, 10**9).amqplink_message.encode())
    assert len(park(original, entity, size).amqplink_message.encode()) == size
    with pytest.raises(MessageSizeExceededError):
        park(original, entity, size - 1)


def test_the_secondary_is_reached_the_way_the_primary_is() -> None:
    from amqplink.servicebus import TransportType
    from amqplink.servicebus.aio import ServiceBusClient

    primary = "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=k1="
    options = PairedNamespaceOptions(SECONDARY)
    over_ws = ServiceBusClient.from_connection_string(
        primary, paired_namespace=options, transport_type=TransportType.AmqpOverWebsocket
    )
    plain = ServiceBusClient.from_connection_string(primary, paired_namespace=options)
    assert over_ws._pairing is not None and plain._pairing is not None
    assert over_ws._pairing.secondary._holder.dialer is not None  # WebSockets to the secondary too
    assert plain._pairing.secondary._holder.dialer is None
    assert over_ws._pairing.names[0] == "contoso/x-servicebus-transfer/0"
