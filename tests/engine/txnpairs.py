"""An engine pair with a control link and a plain link each way, for the transaction tests."""

from __future__ import annotations

from typing import Any

from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.events import DeclareRequested, DischargeRequested, Event, LinkAttachRequested
from amqplink.engine.link import RCV_FIRST, RCV_SECOND, SND_UNSETTLED, ReceiverLink, SenderLink
from amqplink.engine.session import Session
from amqplink.engine.transactions import ControllerLink, CoordinatorLink, TransactionRequest, attach_controller
from amqplink.protocol.definitions import Source, Target

from .pairs import Pair


class TxnPair:
    """A client (the controller) and a server (the coordinator): ``ctl`` the control link,
    ``out`` a client sender to the server, ``into`` a server sender to the client (whose
    receiving end, ``inbox``, settles second, as a peek-lock receiver does)."""

    def __init__(
        self, *, credit: int = 100, source: Source | None = None, fast_paths: bool = True, max_frame_size: int = 65536
    ) -> None:
        config = ConnectionConfig(container_id="server", max_frame_size=max_frame_size)
        self.pair = Pair(server_config=config, auto_accept_links=False)
        self.pair.client.fast_paths = fast_paths
        self.pair.server.fast_paths = fast_paths
        self.session: Session = self.pair.open()
        self.credit = credit
        self.ctl: ControllerLink = attach_controller(self.session, "ctl", source=source)
        self.out: SenderLink = self.session.attach_sender("out", target=Target(address="q"))
        self.inbox: ReceiverLink = self.session.attach_receiver(
            "in", source=Source(address="q"), snd_settle_mode=SND_UNSETTLED, rcv_settle_mode=RCV_SECOND
        )
        self.pump()
        self.coordinator = self.server_link("ctl", CoordinatorLink)
        self.received = self.server_link("out", ReceiverLink)
        self.into = self.server_link("in", SenderLink)
        self.into.auto_settle = False
        self.inbox.flow(credit)
        self.pump()

    def server_link(self, name: str, kind: type[Any]) -> Any:
        link = self.pair.server_link(name, sender=kind is SenderLink)
        assert isinstance(link, kind), link
        return link

    def pump(self) -> None:
        """Move bytes until both sides are quiet; the server answers attaches (a coordinator
        with its capabilities) and grants its receivers ``credit``."""
        self.pair.pump()
        for event in list(self.pair.server_events):
            if isinstance(event, LinkAttachRequested) and not event.link.attach_sent:
                link = event.link
                if isinstance(link, CoordinatorLink):
                    link.accept_attach()
                else:
                    if isinstance(link, ReceiverLink):
                        link.answer_rcv_settle_mode = RCV_FIRST
                    link.attach()
                if isinstance(link, ReceiverLink):
                    link.flow(self.credit)
                self.pair.pump()

    def requests(self) -> list[TransactionRequest]:
        """The declare and discharge requests the server was given since the last call."""
        events = self.pair.take("server")
        self.pair.server_events = [e for e in events if not isinstance(e, DeclareRequested | DischargeRequested)]
        return [e.request for e in events if isinstance(e, DeclareRequested | DischargeRequested)]

    def client_events(self, kind: type[Event]) -> list[Any]:
        return [e for e in self.pair.take("client") if isinstance(e, kind)]
