"""A link detached before its attach is answered (2.6.3), against qpid-proton both ways.

amqplink's engine runs over a plain socket here (no asyncio), so the frames go out
exactly in the order the engine wrote them: attach, then detach before the peer
answered; or, on the server side, a refusal without the application answering.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from proton.utils import BlockingConnection, LinkDetached

from amqplink.engine import errors
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import (
    ConnectionClosed,
    DeliveriesUpdated,
    Event,
    LinkAttachRequested,
    SessionEnded,
)
from amqplink.engine.events import (
    LinkDetached as EngineLinkDetached,
)
from amqplink.engine.link import SND_UNSETTLED
from amqplink.engine.sasl import SaslServer
from amqplink.protocol.definitions import Accepted, Error, Target
from interop.peers.proton_broker import ProtonBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[ProtonBroker]:
    with ProtonBroker() as running:
        yield running


def _run(
    sock: socket.socket, conn: Connection, done: Callable[[list[Event]], bool], timeout: float = 10
) -> list[Event]:
    """Write what the engine has, read what the peer sends, until ``done(events)``."""
    deadline = time.monotonic() + timeout
    events: list[Event] = []
    while not done(events):
        data = conn.data_to_send()
        if data:
            sock.sendall(data)
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out; events so far: {events}"
        sock.settimeout(remaining)
        chunk = sock.recv(65536)
        if not chunk:
            break
        events += conn.receive_data(chunk)
        events += conn.take_events()
    return events


def test_detaching_before_protons_attach_arrives_keeps_the_session(broker: ProtonBroker) -> None:
    host, port = broker.url.removeprefix("amqp://").split(":")
    conn = Connection(ConnectionConfig(container_id="amqplink-hasty", hostname=host))
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        conn.open()
        session = conn.begin_session()
        address = f"hasty-{uuid.uuid4()}"
        hasty = session.attach_sender("hasty", target=Target(address=address), snd_settle_mode=SND_UNSETTLED)
        hasty.detach()  # attach and detach leave together, before proton has answered
        after = session.attach_sender("after", target=Target(address=address), snd_settle_mode=SND_UNSETTLED)
        delivery = after.send(b"the session still works")
        events = _run(
            sock, conn, lambda evs: any(isinstance(e, DeliveriesUpdated) and delivery in e.deliveries for e in evs)
        )
        assert not [e for e in events if isinstance(e, SessionEnded | ConnectionClosed)], events
        (detached,) = [e for e in events if isinstance(e, EngineLinkDetached)]
        assert detached.link is hasty and detached.error is None
        assert isinstance(delivery.remote_state, Accepted)
        assert session.is_mapped and conn.is_open
        conn.close()
        _run(sock, conn, lambda evs: any(isinstance(e, ConnectionClosed) for e in evs))
    assert broker.error is None
    assert broker.state().depths.get(address) == 1


def test_refusing_protons_attach_without_answering_it(broker: ProtonBroker) -> None:
    """The engine, in the server role, detaches a link the application never answered:
    proton sees attach then detach, a refused link, and its session stays up."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        server = Connection(ConnectionConfig(container_id="amqplink-refuser"), server=True, sasl=SaslServer())
        sock, _ = listener.accept()
        with sock:

            def refuse(evs: list[Event]) -> bool:
                for e in evs:
                    if isinstance(e, LinkAttachRequested) and not e.link.is_detached:
                        e.link.detach(Error(condition=errors.NOT_FOUND, description="no such node"))
                return any(isinstance(e, ConnectionClosed) for e in evs)

            _run(sock, server, refuse, timeout=20)
            sock.sendall(server.data_to_send())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=10)
    try:
        for name in ("first", "second"):  # the second attach proves the session survived
            with pytest.raises(LinkDetached) as refused:
                client.create_sender("nowhere", name=name)
            assert "amqp:not-found" in str(refused.value)
    finally:
        client.close()
        thread.join(10)
        listener.close()
    assert not thread.is_alive()
