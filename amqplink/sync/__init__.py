"""Blocking facade over :mod:`amqplink.aio`: one event loop per process.

Every call runs the matching coroutine on a private loop and waits for it, so the same
connection can be used from several threads. The loop runs in the calling thread while
calls come back to back, and in a keeper thread between them (:mod:`amqplink.sync.loop`);
it is made on first use and again in a forked child (a child cannot use its parent's loop
or sockets: connections do not cross ``fork``)::

    with amqplink.sync.connect("amqp://localhost") as conn:
        sender = conn.create_sender("orders")
        sender.send(amqplink.Message(b"hello"))
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import itertools
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from amqplink.aio import connection as aio_connection
from amqplink.aio.receiver import ReceivedMessage, ReceiverMode
from amqplink.aio.receiver import Receiver as AsyncReceiver
from amqplink.aio.sender import Outcome, Sendable, SettleMode
from amqplink.aio.sender import Sender as AsyncSender
from amqplink.sync import loop

__all__ = ["Connection", "Receiver", "Sender", "connect"]

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")
P = ParamSpec("P")

_BATCH = 1000

_run = loop.run
_wait = loop.wait
_submit = loop.submit
_loop_thread = loop.current


def _parameters_of(model: Callable[P, Any]) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """Give the decorated blocking function the parameters of its asyncio ``model``.

    Type checkers see the model's typed signature (a misspelt keyword is an error,
    not swallowed by ``**options``), and so do ``help()`` and ``inspect``; the
    asyncio function checks the arguments at run time.
    """

    def apply(function: Callable[..., R]) -> Callable[P, R]:
        try:  # the model's annotations read in its own module (this one has not its names)
            signature = inspect.signature(model, eval_str=True)
        except NameError:  # a name its module imports only for type checkers: left as text
            signature = inspect.signature(model)
        function.__signature__ = signature.replace(  # type: ignore[attr-defined]  # inspect reads it; a function takes any attribute
            return_annotation=inspect.signature(function).return_annotation
        )
        return function

    return apply


def _method_parameters_of(
    model: Callable[Concatenate[Any, P], Any],
) -> Callable[[Callable[Concatenate[S, ...], R]], Callable[Concatenate[S, P], R]]:
    """:func:`_parameters_of` for methods: the model's parameters after ``self``."""
    return _parameters_of(model)


class _Outcome(concurrent.futures.Future[T]):
    """The outcome of an operation under way on the loop (a send handed over without
    waiting), for a blocking caller. Waiting for it (``result``, ``exception``) runs the
    loop on the waiting thread, as a blocking call does, instead of waiting for the keeper
    to take the loop over; a time-out there leaves the operation under way."""

    def __init__(self, source: asyncio.Future[T]) -> None:
        super().__init__()
        self._source = source
        source.add_done_callback(self._copy)

    def _copy(self, done: asyncio.Future[T]) -> None:
        if done.cancelled():
            self.cancel()
        elif (error := done.exception()) is not None:
            self.set_exception(error)
        else:
            self.set_result(done.result())

    def _drive(self, timeout: float | None) -> float | None:
        """Run the loop here until the source is decided (at most ``timeout`` s); the time
        left to give the waiting of :class:`concurrent.futures.Future` (0: no more)."""
        if self.done() or asyncio._get_running_loop() is loop.current().loop:
            return timeout  # from the loop itself: the waiting as it always was
        source = self._source
        with contextlib.suppress(Exception):  # the source's error or the time-out: raised by the caller
            _wait(lambda _: asyncio.shield(source), timeout)
        return 0

    def result(self, timeout: float | None = None) -> T:
        return super().result(self._drive(timeout))

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return super().exception(self._drive(timeout))


@_parameters_of(aio_connection.connect)
def connect(url: str, **options: Any) -> Connection:
    """Blocking :func:`amqplink.aio.connect`; same arguments."""
    return Connection(_run(aio_connection.connect(url, **options)))


class Connection:
    """Blocking wrapper of :class:`amqplink.aio.Connection`."""

    def __init__(self, inner: aio_connection.Connection) -> None:
        self.aio = inner

    def __repr__(self) -> str:
        return repr(self.aio).replace("amqplink.aio.", "amqplink.sync.")

    @property
    def closed(self) -> bool:
        """True once the connection is closed (by either side or by a failure)."""
        return self.aio.closed

    @_method_parameters_of(aio_connection.Connection.create_sender)
    def create_sender(self, address: str | None, **options: Any) -> Sender:
        """Blocking :meth:`amqplink.aio.Connection.create_sender`; same arguments."""
        return Sender(_run(self.aio.create_sender(address, **options)))

    @_method_parameters_of(aio_connection.Connection.create_receiver)
    def create_receiver(self, address: str | None, **options: Any) -> Receiver:
        """Blocking :meth:`amqplink.aio.Connection.create_receiver`; same arguments."""
        return Receiver(_run(self.aio.create_receiver(address, **options)))

    def close(self) -> None:
        """Close the connection and wait for the peer's close."""
        _run(self.aio.close())

    def __enter__(self) -> Connection:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _Link:
    aio: AsyncSender | AsyncReceiver

    @property
    def closed(self) -> bool:
        """True once the link is detached."""
        return self.aio.closed

    def close(self) -> None:
        """Detach and wait for the peer's detach."""
        _run(self.aio.close())

    def __enter__(self) -> Any:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Sender(_Link):
    """Blocking wrapper of :class:`amqplink.aio.Sender`."""

    def __init__(self, inner: AsyncSender) -> None:
        self.aio: AsyncSender = inner

    @property
    def settle_mode(self) -> SettleMode:
        """``"unsettled"`` (each send has an outcome) or ``"settled"`` (pre-settled, no outcome)."""
        return self.aio.settle_mode

    def send(self, message: Sendable, *, timeout: float | None = None) -> Outcome | None:
        """Send and wait for the outcome; raises :class:`~amqplink.aio.MessageRejected`."""
        return _run(self.aio.send(message, timeout=timeout))

    def send_nowait(self, message: Sendable) -> concurrent.futures.Future[Any]:
        """Block only for room under ``max_in_flight``; return a future for the outcome."""

        async def hand_over() -> concurrent.futures.Future[Any]:
            return _Outcome(await self.aio.send_nowait(message))

        return _run(hand_over())

    def send_many(self, messages: Iterable[Sendable]) -> list[Any]:
        """Pipeline all messages (handed over in batches); return the outcomes in order."""

        async def send_batch(batch: list[Sendable]) -> list[asyncio.Future[Any]]:
            return [await self.aio.send_nowait(m) for m in batch]

        async def collect(futures: list[asyncio.Future[Any]]) -> list[Any]:
            return [await f for f in futures]

        futures: list[asyncio.Future[Any]] = []
        iterator = iter(messages)
        while batch := list(itertools.islice(iterator, _BATCH)):
            futures += _run(send_batch(batch))
        return _run(collect(futures))

    def wait_settled(self, timeout: float | None = None) -> None:
        """Wait until every message sent so far is settled (or written, in settled mode)."""
        _run(self.aio.wait_settled(), timeout)


class Receiver(_Link):
    """Blocking wrapper of :class:`amqplink.aio.Receiver`."""

    def __init__(self, inner: AsyncReceiver) -> None:
        self.aio: AsyncReceiver = inner

    @property
    def mode(self) -> ReceiverMode:
        """``"peek-lock"`` or ``"receive-and-delete"``."""
        return self.aio.mode

    def receive(self, max_messages: int = 1, timeout: float | None = None) -> list[ReceivedMessage]:
        """Wait up to ``timeout`` s for messages; an empty list on time-out."""
        return _run(self.aio.receive(max_messages, timeout))

    def __iter__(self) -> Iterator[ReceivedMessage]:
        while True:
            got = self.receive(1)
            if not got:
                if self.aio.closed:
                    return
                continue
            yield got[0]

    def accept(self, *messages: ReceivedMessage) -> None:
        """Settle ``messages`` with ``accepted``: done with them (peek-lock)."""
        _run(self.aio.accept(*messages))

    def release(self, *messages: ReceivedMessage) -> None:
        """Settle ``messages`` with ``released``: give them back, unchanged, for redelivery."""
        _run(self.aio.release(*messages))

    @_method_parameters_of(AsyncReceiver.modify)
    def modify(self, *messages: ReceivedMessage, **options: Any) -> None:
        """Blocking :meth:`amqplink.aio.Receiver.modify`; same arguments."""
        _run(self.aio.modify(*messages, **options))

    @_method_parameters_of(AsyncReceiver.reject)
    def reject(self, *messages: ReceivedMessage, **options: Any) -> None:
        """Blocking :meth:`amqplink.aio.Receiver.reject`; same arguments."""
        _run(self.aio.reject(*messages, **options))
