"""A small AMQP 1.0 queue broker written with qpid-proton's ``Container`` and ``MessagingHandler``.

An independent peer for the amqplink client: nothing here uses amqplink. It keeps
one FIFO queue per address and forwards transfer payloads byte for byte (proton's
``Message`` has no footer, so decoding and re-encoding would lose sections).

* A peer's sending link delivers into the queue named by its target; the broker
  grants ``credit_window`` credit and tops it up. Unsettled deliveries are accepted
  once stored (rcv-settle-mode ``second``: settled when the peer settles);
  pre-settled ones are simply stored.
* A peer's receiving link consumes from the queue named by its source; a dynamic
  source gets a generated address. Messages go to consumers with credit, round
  robin. snd-settle-mode ``settled`` (receive-and-delete): sent pre-settled and
  gone. Otherwise the broker holds each delivery until the consumer's outcome:
  ``accepted`` drops it, ``rejected`` and ``modified`` with undeliverable-here
  dead-letter it (a list per queue), ``released`` and other ``modified`` put it
  back at the head of the queue. Settling without an outcome counts as released.
  A consumer that detaches or disconnects gives its unsettled messages back, in
  order. rcv-settle-mode ``second`` is honoured: the broker settles a delivery
  after applying the peer's outcome and the peer settles last.
* Each link's attach answers with the settle modes the peer asked for; with
  ``rcv_settle_mode="first"`` it answers rcv-settle-mode ``first`` (proton's default
  link setting) and, as proton's ``MessagingHandler`` does, settles a delivery it
  sent only once the consumer has settled it: an unsettled outcome waits.
* Drain is honoured: credit left after the queue is empty is given back.

Not done: the modified outcome's delivery-failed and message-annotations are not
applied to the stored message (the payload is never re-encoded).

``ProtonBroker`` runs it in a background thread on a free loopback port::

    with ProtonBroker() as broker:
        ... broker.url ...            # amqp://127.0.0.1:PORT

or standalone: ``python3 -m interop.peers.proton_broker --port 5672``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import signal
import socket
import threading
import uuid
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from proton import Condition, Delivery, Endpoint, Link, Terminus
from proton.handlers import EndpointStateHandler, MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector

__all__ = ["BrokerState", "ProtonBroker", "Queue"]

log = logging.getLogger(__name__)

DEFAULT_CREDIT_WINDOW = 1000
STOP_GRACE = 2.0  # seconds the container may spend closing connections before it is stopped


@dataclass(eq=False)
class Queue:
    """One address: stored payloads, the consumer links, dead letters."""

    name: str
    messages: deque[bytes] = field(default_factory=deque)
    consumers: list[Link] = field(default_factory=list)
    dead_letters: list[tuple[bytes, str]] = field(default_factory=list)
    next_consumer: int = 0


@dataclass(eq=False)
class _Consumer:
    """What the broker keeps per sending link: its queue and the payloads it holds unsettled."""

    queue: Queue
    presettled: bool
    unsettled: dict[str, bytes] = field(default_factory=dict)  # tag -> payload, in send order
    next_tag: int = 0


@dataclass(eq=False)
class _Producer:
    """What the broker keeps per receiving link: its queue and the delivery being read."""

    queue: Queue
    second: bool
    buffer: bytearray = field(default_factory=bytearray)


@dataclass
class BrokerState:
    """A snapshot taken on the container thread: queue depths, dead letters, links."""

    depths: dict[str, int]
    dead_letters: dict[str, list[tuple[bytes, str]]]
    consumers: int
    producers: int
    unsettled: int


class _Broker(MessagingHandler):
    """The broker's handler: proton calls it on the container thread only."""

    def __init__(self, credit_window: int, rcv_settle_mode: str = "echo") -> None:
        # prefetch=0: the broker grants credit itself; no auto accept or settle.
        super().__init__(prefetch=0, auto_accept=False, auto_settle=False)
        # Payloads are forwarded raw, so keep proton's endpoint open/close plumbing
        # (built as MessagingHandler builds it) but not its message-level helpers,
        # which would decode every transfer.
        self.handlers = [EndpointStateHandler(peer_close_is_error=False, delegate=weakref.proxy(self))]
        self.credit_window = credit_window
        self.answer_first = rcv_settle_mode == "first"
        self.queues: dict[str, Queue] = {}
        self.consumers: dict[Link, _Consumer] = {}
        self.producers: dict[Link, _Producer] = {}
        self.acceptor: Any = None
        self.container: Any = None
        self.connections: set[Any] = set()
        self.stopping = False
        self.injector: EventInjector | None = None

    def queue(self, address: str) -> Queue:
        """The queue for ``address``, created on first use."""
        queue = self.queues.get(address)
        if queue is None:
            queue = self.queues[address] = Queue(address)
        return queue

    # -- links ------------------------------------------------------------------------
    def on_link_opening(self, event: Any) -> None:
        link = event.link
        # Answer with the settle modes the peer asked for (2.6.3, 3.8.2/3.8.3).
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = Link.RCV_FIRST if self.answer_first else link.remote_rcv_settle_mode
        if link.is_sender:
            self._open_consumer(link)
        else:
            self._open_producer(link)

    def _open_consumer(self, link: Any) -> None:
        source = link.remote_source
        link.target.copy(link.remote_target)
        if source.dynamic:
            address = f"dynamic-{uuid.uuid4()}"
            link.source.address = address
            link.source.dynamic = True
        elif source.address:
            address = source.address
            link.source.address = address
        else:
            self._refuse(link, "a receiving link needs a source address (or dynamic=true)")
            return
        queue = self.queue(address)
        self.consumers[link] = _Consumer(queue, presettled=link.snd_settle_mode == Link.SND_SETTLED)
        queue.consumers.append(link)
        link.open()
        log.debug("consumer %r attached to %r", link.name, address)

    def _open_producer(self, link: Any) -> None:
        target = link.remote_target
        link.source.copy(link.remote_source)
        if not target.address:
            self._refuse(link, "a sending link needs a target address")
            return
        link.target.address = target.address
        self.producers[link] = _Producer(self.queue(target.address), second=link.rcv_settle_mode == Link.RCV_SECOND)
        link.open()
        link.flow(self.credit_window)
        log.debug("producer %r attached to %r", link.name, target.address)

    @staticmethod
    def _refuse(link: Any, why: str) -> None:
        # A refused attach carries a null terminus and is followed by a detach (2.6.3):
        # proton sends an empty terminus unless its type is left unspecified.
        (link.source if link.is_sender else link.target).type = Terminus.UNSPECIFIED
        link.condition = Condition("amqp:not-found", why)
        link.open()

    def on_link_opened(self, event: Any) -> None:
        link = event.link
        if link not in self.consumers and link not in self.producers:
            link.close()  # refused in on_link_opening: detach now that the attach is out

    def on_link_closing(self, event: Any) -> None:
        self._drop_links(lambda link: link == event.link)

    def on_link_closed(self, event: Any) -> None:
        self._drop_links(lambda link: link == event.link)

    def on_link_error(self, event: Any) -> None:
        # The default closes the whole connection; a broker only drops the link.
        log.info("link %r closed by the peer with %s", event.link.name, event.link.remote_condition)
        self._drop_links(lambda link: link == event.link)

    def on_session_closing(self, event: Any) -> None:
        self._drop_links(lambda link: link.session == event.session)

    def on_session_error(self, event: Any) -> None:
        log.info("session ended by the peer with %s", event.session.remote_condition)
        self._drop_links(lambda link: link.session == event.session)

    def on_connection_init(self, event: Any) -> None:
        # Accepted connections do not get the container's id by themselves (proton sends "").
        event.connection.container = self.container.container_id

    def on_connection_opening(self, event: Any) -> None:
        self.connections.add(event.connection)

    def on_connection_closed(self, event: Any) -> None:
        self._drop_links(lambda link: link.connection == event.connection)
        self._forget_connection(event.connection)

    def on_connection_closing(self, event: Any) -> None:
        self._drop_links(lambda link: link.connection == event.connection)

    def on_connection_error(self, event: Any) -> None:
        log.info("connection closed by the peer with %s", event.connection.remote_condition)
        self._drop_links(lambda link: link.connection == event.connection)

    def on_disconnected(self, event: Any) -> None:
        self._drop_links(lambda link: link.connection == event.connection)

    def on_transport_closed(self, event: Any) -> None:
        if event.connection is not None:
            self._drop_links(lambda link: link.connection == event.connection)
            self._forget_connection(event.connection)

    def _drop_links(self, which: Callable[[Any], bool]) -> None:
        """Forget the matching links; a consumer's unsettled messages go back to the head, in order."""
        for link in [link for link in self.producers if which(link)]:
            del self.producers[link]
        touched: list[Queue] = []
        for link in [link for link in self.consumers if which(link)]:
            consumer = self.consumers.pop(link)
            queue = consumer.queue
            queue.consumers = [c for c in queue.consumers if c != link]
            queue.messages.extendleft(reversed(consumer.unsettled.values()))
            if consumer.unsettled:
                log.debug("requeued %d unsettled messages of %r", len(consumer.unsettled), link.name)
            consumer.unsettled.clear()
            touched.append(queue)
        for queue in touched:
            self._dispatch(queue)

    # -- flow and deliveries ----------------------------------------------------------
    def on_link_flow(self, event: Any) -> None:
        link = event.link
        consumer = self.consumers.get(link) if link.is_sender else None
        if consumer is None:
            return
        self._dispatch(consumer.queue)
        if link.drain_mode and link.credit > 0:
            link.drained()  # "the sender MUST ... consume all remaining link-credit" (2.6.7)

    def _dispatch(self, queue: Queue) -> None:
        """Send messages to consumers with credit, round robin, while there are messages."""
        messages = queue.messages
        while messages:
            ready = [c for c in queue.consumers if c.credit > 0 and c.state & Endpoint.LOCAL_ACTIVE]
            if not ready:
                return
            start = queue.next_consumer % len(ready)
            for link in ready[start:] + ready[:start]:
                if not messages:
                    break
                self._send(link, messages.popleft())
            queue.next_consumer = start + 1

    def _send(self, link: Any, payload: bytes) -> None:
        consumer = self.consumers[link]
        # Text tags: proton's Python binding reads tags back as UTF-8 text.
        tag = str(consumer.next_tag)
        consumer.next_tag += 1
        delivery = link.delivery(tag)
        link.stream(payload)
        link.advance()
        if consumer.presettled:
            delivery.settle()
        else:
            consumer.unsettled[tag] = payload

    def on_delivery(self, event: Any) -> None:
        delivery = event.delivery
        link = delivery.link
        if link.is_sender:
            self._on_outcome(link, delivery)
        else:
            self._on_transfer(link, delivery)

    def _on_transfer(self, link: Any, delivery: Any) -> None:
        producer = self.producers.get(link)
        if producer is None:
            delivery.settle()
            return
        if delivery.aborted:
            producer.buffer.clear()
            delivery.settle()
            self._top_up(link)
            return
        if delivery.readable:
            chunk = link.recv(delivery.pending)
            if chunk:
                producer.buffer += chunk
            if delivery.partial:
                return
            payload = bytes(producer.buffer)
            producer.buffer.clear()
            link.advance()
            producer.queue.messages.append(payload)
            if delivery.settled:  # pre-settled by the peer
                delivery.settle()
            else:
                delivery.update(Delivery.ACCEPTED)
                if not producer.second:
                    delivery.settle()
            self._top_up(link)
            self._dispatch(producer.queue)
        elif delivery.updated and delivery.settled:
            delivery.settle()  # rcv-settle-mode second: the peer settled after our outcome

    def _top_up(self, link: Any) -> None:
        if link.credit < self.credit_window // 2:
            link.flow(self.credit_window - link.credit)

    def _on_outcome(self, link: Any, delivery: Any) -> None:
        if not delivery.updated:
            return
        consumer = self.consumers.get(link)
        state = delivery.remote_state
        terminal = state in (Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED)
        if not terminal and not delivery.settled:
            return  # a non-terminal state (received): nothing to do yet
        if self.answer_first and not delivery.settled:
            return  # rcv-settle-mode first: the consumer settles first (proton's default handler waits)
        payload = consumer.unsettled.pop(delivery.tag, None) if consumer is not None else None
        delivery.settle()
        if payload is None:
            return
        queue = consumer.queue  # type: ignore[union-attr]
        if state == Delivery.ACCEPTED:
            return
        if state == Delivery.REJECTED:
            condition = delivery.remote.condition
            queue.dead_letters.append((payload, f"rejected {condition.name if condition else ''}".strip()))
        elif state == Delivery.MODIFIED and delivery.remote.undeliverable:
            queue.dead_letters.append((payload, "modified undeliverable-here"))
        else:  # released, modified, or settled with no outcome
            queue.messages.appendleft(payload)
            self._dispatch(queue)

    # -- control from other threads ---------------------------------------------------
    def on_broker_call(self, event: Any) -> None:
        function, future = event.subject
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(function(self))
            except BaseException as exc:
                future.set_exception(exc)

    def on_broker_stop(self, event: Any) -> None:
        self.stopping = True
        if self.acceptor is not None:
            self.acceptor.close()
        if self.injector is not None:
            self.injector.close()
        for connection in list(self.connections):
            if connection.state & Endpoint.LOCAL_ACTIVE:
                connection.close()
        if self.connections:
            self.container.schedule(STOP_GRACE, _Stopper())
        else:
            self.container.stop()

    def _forget_connection(self, connection: Any) -> None:
        self.connections.discard(connection)
        if self.stopping and not self.connections:
            self.container.stop()


class _Stopper:
    """Timer handler: stop the container if closing connections took too long."""

    def on_timer_task(self, event: Any) -> None:
        event.container.stop()


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


class ProtonBroker:
    """The proton broker in a background thread; a context manager exposing ``url``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        credit_window: int = DEFAULT_CREDIT_WINDOW,
        rcv_settle_mode: str = "echo",
    ) -> None:
        """``rcv_settle_mode``: ``"echo"`` answers what the peer asked; ``"first"`` answers
        first and waits for the consumer to settle, as proton's defaults do."""
        self.host = host
        self.port = port
        self.url = ""
        self._handler = _Broker(credit_window, rcv_settle_mode)
        self._container: Container | None = None
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> ProtonBroker:
        """Listen (a free port unless one was given) and run the container in a thread."""
        handler = self._handler
        container = handler.container = Container(handler)
        container.container_id = f"proton-broker-{uuid.uuid4()}"
        attempts = 1 if self.port else 20
        for attempt in range(attempts):
            port = self.port or _free_port(self.host)
            try:
                handler.acceptor = container.listen(f"{self.host}:{port}")
            except OSError:
                if attempt == attempts - 1:
                    raise
                continue
            self.port = port
            break
        handler.injector = EventInjector()
        container.selectable(handler.injector)
        self._container = container
        self.url = f"amqp://{self.host}:{self.port}"
        self._thread = threading.Thread(target=self._run, name="proton-broker", daemon=True)
        self._thread.start()
        log.info("proton broker listening on %s", self.url)
        return self

    def _run(self) -> None:
        assert self._container is not None
        try:
            self._container.run()
        except BaseException as exc:  # reported by stop() and state()
            self.error = exc
            log.exception("proton broker failed")

    def call(self, function: Callable[[_Broker], Any], timeout: float = 10.0) -> Any:
        """Run ``function(handler)`` on the container thread and return its result."""
        if self.error is not None:
            raise RuntimeError("the proton broker failed") from self.error
        injector = self._handler.injector
        if injector is None or self._thread is None or not self._thread.is_alive():
            raise RuntimeError("the proton broker is not running")
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        injector.trigger(ApplicationEvent("broker_call", subject=(function, future)))
        return future.result(timeout)

    def state(self) -> BrokerState:
        """Queue depths, dead letters and link counts, read on the container thread."""

        def snapshot(handler: _Broker) -> BrokerState:
            return BrokerState(
                depths={name: len(q.messages) for name, q in handler.queues.items()},
                dead_letters={name: list(q.dead_letters) for name, q in handler.queues.items() if q.dead_letters},
                consumers=len(handler.consumers),
                producers=len(handler.producers),
                unsettled=sum(len(c.unsettled) for c in handler.consumers.values()),
            )

        state: BrokerState = self.call(snapshot)
        return state

    def stop(self, timeout: float = 10.0) -> None:
        """Close the listener and connections, stop the container, join its thread."""
        thread = self._thread
        injector = self._handler.injector
        if thread is None:
            return
        if thread.is_alive() and injector is not None:
            injector.trigger(ApplicationEvent("broker_stop"))
        thread.join(timeout)
        self._thread = None
        if thread.is_alive():
            raise RuntimeError(f"the proton broker thread did not stop within {timeout} s")
        if self.error is not None:
            raise RuntimeError("the proton broker failed while running") from self.error

    def __enter__(self) -> ProtonBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Run the broker in the foreground until interrupted."""
    parser = argparse.ArgumentParser(prog="python3 -m interop.peers.proton_broker", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5672, help="0: any free port")
    parser.add_argument("--credit-window", type=int, default=DEFAULT_CREDIT_WINDOW)
    parser.add_argument("--rcv-settle-mode", choices=("echo", "first"), default="echo")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    if args.verbose:
        log.setLevel(logging.DEBUG)  # this broker's link events; proton's own event trace stays off
    broker = ProtonBroker(args.host, args.port, args.credit_window, args.rcv_settle_mode).start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        while not done.is_set() and broker._thread is not None and broker._thread.is_alive():
            done.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        log.info("stopping")
        broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
