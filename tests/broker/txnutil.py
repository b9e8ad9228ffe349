"""A client engine working with the Service Bus broker in process, for the transaction tests:
a control link, senders (plain or via another entity), peek-lock receivers, the broker's
clock in the test's hands."""

from __future__ import annotations

from typing import Any

from amqplink.broker.durable import Persistence
from amqplink.broker.namespace import Namespace
from amqplink.broker.sbserver import ServiceBusHost
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import DeliveriesUpdated, Event, TransactionDeclared, TransactionEnded
from amqplink.engine.link import RCV_SECOND, SND_UNSETTLED, Delivery, ReceiverLink, SenderLink
from amqplink.engine.transactions import Transaction, attach_controller, transactional_state
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Source, Target, TransactionalState
from amqplink.sbwire.nodes import TRANSFER_DESTINATION_ADDRESS
from interop import inprocess
from tests.broker.nsutil import T0
from tests.engine.pairs import received_in


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class TxnClient:
    """The broker (``host``, ``ns``) and one client connection with a control link."""

    def __init__(self, ns: Namespace | None = None, persistence: Persistence | None = None) -> None:
        self.ns = ns if ns is not None else Namespace()
        if persistence is not None:
            persistence.attach(self.ns)
        self.clock = Clock()
        self.host = ServiceBusHost(self.ns, persistence=persistence, clock=self.clock)
        self.server = Connection(ConnectionConfig(container_id="broker"), server=True)
        self.client = Connection(ConnectionConfig(container_id="client"))
        self.pipe = inprocess.Pipe(
            self.client, self.server, inprocess.accept(self.host, self.server), persistence=persistence
        )
        self.events: list[Event] = []
        self.client.open()
        self.session = self.client.begin_session()
        self.ctl = attach_controller(self.session, "ctl")
        self.pump()
        assert self.ctl.is_attached

    def pump(self) -> list[Event]:
        got = self.pipe.pump()
        self.events += got
        return got

    async def pump_stored(self) -> list[Event]:
        got = await self.pipe.pump_stored()
        self.events += got
        return got

    def tick(self, seconds: float) -> None:
        """Let ``seconds`` pass on the broker's clock and apply them."""
        self.clock.now += seconds
        self.host.tick()
        self.pump()

    # -- links -----------------------------------------------------------------------------
    def sender(self, address: str, *, via: str | None = None) -> SenderLink:
        """A sender to ``address`` (through ``via``: the link's target, the address its
        transfer destination, as the .NET via-sender attaches)."""
        if via is None:
            link = self.session.attach_sender(f"send-{address}", target=Target(address=address))
        else:
            link = self.session.attach_sender(
                f"send-{address}-via-{via}",
                target=Target(address=via),
                properties={TRANSFER_DESTINATION_ADDRESS: address},
            )
        self.pump()
        return link

    def receiver(self, address: str, credit: int = 100) -> ReceiverLink:
        """A peek-lock receiver (rcv-settle-mode second: the broker settles)."""
        link = self.session.attach_receiver(
            f"recv-{address}", source=Source(address=address), snd_settle_mode=SND_UNSETTLED, rcv_settle_mode=RCV_SECOND
        )
        link.flow(credit)
        self.pump()
        return link

    def received(self, link: ReceiverLink) -> list[Delivery]:
        return [d for d in received_in(self.events) if d.link is link]

    # -- transactions ------------------------------------------------------------------------
    def declare(self) -> Transaction:
        txn = self.ctl.declare()
        got = self.pump()
        assert any(isinstance(e, TransactionDeclared) and e.transaction is txn for e in got), got
        return txn

    def discharge(self, txn: Transaction, *, fail: bool = False) -> Any:
        """Discharge; the error the coordinator gave (None: done as asked)."""
        self.ctl.discharge(txn, fail=fail)
        got = self.pump()
        ended = [e for e in got if isinstance(e, TransactionEnded) and e.transaction is txn]
        assert ended, got
        return ended[0].error

    async def discharge_stored(self, txn: Transaction, *, fail: bool = False) -> Any:
        self.ctl.discharge(txn, fail=fail)
        got = await self.pump_stored()
        ended = [e for e in got if isinstance(e, TransactionEnded) and e.transaction is txn]
        assert ended, got
        return ended[0].error

    def send(self, link: SenderLink, txn: Transaction | None = None, **friendly: Any) -> Delivery:
        """Send a message (in ``txn`` when given); the delivery, its outcome in ``remote_state``."""
        payload = Message(friendly.pop("body", b"x"), **friendly).encode()
        delivery = link.send(payload) if txn is None else link.send_with_state(payload, transactional_state(txn))
        self.pump()
        return delivery

    def settle(self, delivery: Delivery, outcome: Any = None, txn: Transaction | None = None) -> Any:
        """Settle a received delivery (in ``txn``: its provisional outcome); the state the
        broker answered with."""
        outcome = Accepted() if outcome is None else outcome
        state = outcome if txn is None else transactional_state(txn, outcome)
        link = delivery.link
        assert isinstance(link, ReceiverLink)
        link.settle(delivery, state)
        got = self.pump()
        answers = [e.state for e in got if isinstance(e, DeliveriesUpdated) and delivery in e.deliveries]
        return answers[-1] if answers else None


def outcome_of(state: Any) -> Any:
    """The outcome a (transactional) state carries."""
    return state.outcome if type(state) is TransactionalState else state


def condition_of(state: Any) -> str | None:
    """The condition of the rejection a (transactional) state carries (None: not rejected)."""
    outcome = outcome_of(state)
    error = getattr(outcome, "error", None)
    return None if error is None else str(error.condition)
