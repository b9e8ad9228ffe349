"""Blocking facade over :mod:`amqplink.aio`: one event-loop thread per process.

Every call runs the matching coroutine on a private loop in a daemon thread and
waits for it, so the same connection can be used from several threads. The
thread is started on first use and again in a forked child (a child cannot use
its parent's loop or sockets: connections do not cross ``fork``)::

    with amqplink.sync.connect("amqp://localhost") as conn:
        sender = conn.create_sender("orders")
        sender.send(amqplink.Message(b"hello"))
"""

from __future__ import annotations

import _thread
import asyncio
import collections
import concurrent.futures
import inspect
import itertools
import os
import selectors
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from amqplink.aio import connection as aio_connection
from amqplink.aio.receiver import ReceivedMessage, ReceiverMode
from amqplink.aio.receiver import Receiver as AsyncReceiver
from amqplink.aio.sender import Outcome, Sendable, SettleMode
from amqplink.aio.sender import Sender as AsyncSender

__all__ = ["Connection", "Receiver", "Sender", "connect"]

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")
P = ParamSpec("P")

_BATCH = 1000


class _ReleasingSelector(selectors.DefaultSelector):
    """The loop thread's selector: it releases the callers whose calls ended in this loop
    turn just before the loop waits for I/O. Released at once, a caller would wake only to
    wait for the GIL, which the loop thread holds until that wait: two wake-ups per call
    where one does."""

    def __init__(self) -> None:
        super().__init__()
        self.finished: list[_thread.LockType] = []

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        finished = self.finished
        if finished:
            self.finished = []
            for done in finished:
                done.release()
        return super().select(timeout)


class _LoopThread:
    """The process's event loop, running in a daemon thread."""

    def __init__(self) -> None:
        self.selector = _ReleasingSelector()
        self.loop: asyncio.AbstractEventLoop = asyncio.SelectorEventLoop(self.selector)
        self.pid = os.getpid()
        ready = threading.Event()
        self._inbox: collections.deque[_Call] = collections.deque()
        self._draining = False
        self.thread = threading.Thread(target=self._run, args=(ready,), name="amqplink-loop", daemon=True)
        self.thread.start()
        ready.wait()

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    def submit(self, call: _Call) -> None:
        """Have the loop thread start ``call``: one wake-up (``call_soon_threadsafe``, a byte
        on the loop's self-pipe) for all the calls other threads submit before it drains them.

        The call is queued before the flag is read, and the drain clears the flag before it
        takes the queue, so a call is always either taken by a drain under way or followed
        by a new one (at worst an empty drain runs)."""
        self._inbox.append(call)
        if not self._draining:
            self._draining = True
            self.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        self._draining = False
        inbox = self._inbox
        while inbox:
            inbox.popleft().start()


_lock = threading.Lock()
_current: _LoopThread | None = None


def _loop_thread() -> _LoopThread:
    global _current
    current = _current
    if current is not None and current.pid == os.getpid():
        return current
    with _lock:
        if _current is None or _current.pid != os.getpid():
            _current = _LoopThread()
        return _current


def _submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    lt = _loop_thread()
    if threading.current_thread() is lt.thread:
        coro.close()
        raise RuntimeError("amqplink.sync called from its own event-loop thread: use amqplink.aio there")
    return asyncio.run_coroutine_threadsafe(coro, lt.loop)


Notify = Callable[[BaseException | None], None]
"""Told once, on the loop thread, how an operation started by a callback ended (None: done)."""
Begin = Callable[[Notify], Awaitable[Any] | None]
"""Starts a blocking call's operation on the loop thread: a coroutine (run as a Task), a
future (waited for as it is; one with a ``report_to(callback)`` method calls back as it is
decided), or None when it will tell the :data:`Notify` it is given."""


class _Call:
    """One blocking call: its operation starts on the loop thread while the caller waits on a
    bare lock, released when the operation ends.

    The hop costs one ``call_soon_threadsafe`` there and one lock release back: no
    ``concurrent.futures.Future`` (its condition variable), none of
    ``run_coroutine_threadsafe``'s chaining callbacks (a second hop onto the loop per call),
    and no Task at all when the operation is a future (a settlement) or reports to a
    callback (a send on the fast path)."""

    __slots__ = ("_abandoned", "_begin", "_done", "_error", "_pending", "_selector", "_value")

    def __init__(self, begin: Begin, selector: _ReleasingSelector) -> None:
        self._begin: Begin | None = begin
        self._selector = selector
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self._pending: asyncio.Future[Any] | None = None
        self._value: Any = None
        self._error: BaseException | None = None
        self._abandoned = False

    def start(self) -> None:
        """On the loop thread: start the operation (unless the caller gave up meanwhile)."""
        begin, self._begin = self._begin, None
        assert begin is not None
        if self._abandoned:
            _close(begin)
            return
        try:
            started = begin(self.notify)
            if started is None:
                return  # it tells notify
            if isinstance(started, asyncio.Future):
                self._pending = started
                report_to = getattr(started, "report_to", None)
                if report_to is not None:  # told as it is decided, not one loop turn later
                    report_to(self._finished)
                else:
                    started.add_done_callback(self._finished)
            else:
                self._pending = asyncio.get_running_loop().create_task(self._run(started))
        except BaseException as exc:  # handed to the caller
            self.notify(exc)
            if not isinstance(exc, Exception):
                raise

    async def _run(self, awaitable: Awaitable[Any]) -> None:
        # The caller is released from the Task's last step itself (a done-callback would
        # cost the loop one more iteration per call).
        try:
            value = await awaitable
        except asyncio.CancelledError:
            self.notify(concurrent.futures.CancelledError())
            raise
        except BaseException as exc:  # handed to the caller
            self.notify(exc)
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt, SystemExit: the loop stops, as a Task makes it
        else:
            self._value = value
            self.notify(None)

    def _finished(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            self.notify(concurrent.futures.CancelledError())
        elif (error := future.exception()) is not None:
            self.notify(error)
        else:
            self._value = future.result()
            self.notify(None)

    def notify(self, error: BaseException | None) -> None:
        """The operation ended (with ``error``): the caller is released before the loop next
        waits for I/O (see :class:`_ReleasingSelector`)."""
        self._error = error
        self._pending = None
        self._selector.finished.append(self._done)

    def abandon(self) -> None:
        """On the loop thread: the caller timed out; cancel the operation (or never start it)."""
        self._abandoned = True
        if self._pending is not None:
            self._pending.cancel()

    def result(self, loop: asyncio.AbstractEventLoop, timeout: float | None) -> Any:
        """Wait (in the calling thread) for the operation's result; raise its exception."""
        if not self._done.acquire(timeout=-1 if timeout is None else timeout):
            loop.call_soon_threadsafe(self.abandon)
            raise TimeoutError(f"amqplink.sync call did not finish within {timeout} s")
        error, self._error = self._error, None
        if error is not None:
            raise error
        return self._value


def _close(begin: Begin) -> None:
    """A call abandoned before it started: close its coroutine, if it was given one."""
    coro = getattr(begin, "coro", None)
    if coro is not None:
        coro.close()


class _Given:
    """A :data:`Begin` for a coroutine made by the caller (closed if never started)."""

    __slots__ = ("coro",)

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro

    def __call__(self, _notify: Notify) -> Awaitable[Any]:
        return self.coro


def _wait(begin: Begin, timeout: float | None = None) -> Any:
    """Start ``begin`` on the loop thread and wait for what it started (at most ``timeout``
    s: then it is cancelled and ``TimeoutError`` raised)."""
    lt = _loop_thread()
    if threading.current_thread() is lt.thread:
        _close(begin)
        raise RuntimeError("amqplink.sync called from its own event-loop thread: use amqplink.aio there")
    call = _Call(begin, lt.selector)
    lt.submit(call)
    return call.result(lt.loop, timeout)


def _run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the loop thread and wait for its result (at most ``timeout`` s: then
    it is cancelled and ``TimeoutError`` raised)."""
    result: T = _wait(_Given(coro), timeout)
    return result


def _parameters_of(model: Callable[P, Any]) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """Give the decorated blocking function the parameters of its asyncio ``model``.

    Type checkers see the model's typed signature (a misspelt keyword is an error,
    not swallowed by ``**options``), and so do ``help()`` and ``inspect``; the
    asyncio function checks the arguments at run time.
    """

    def apply(function: Callable[..., R]) -> Callable[P, R]:
        signature = inspect.signature(model)
        function.__signature__ = signature.replace(  # type: ignore[attr-defined]
            return_annotation=inspect.signature(function).return_annotation
        )
        return function

    return apply


def _method_parameters_of(
    model: Callable[Concatenate[Any, P], Any],
) -> Callable[[Callable[Concatenate[S, ...], R]], Callable[Concatenate[S, P], R]]:
    """:func:`_parameters_of` for methods: the model's parameters after ``self``."""
    return _parameters_of(model)


def _bridge(source: asyncio.Future[T], target: concurrent.futures.Future[T]) -> None:
    def copy(done: asyncio.Future[T]) -> None:
        if done.cancelled():
            target.cancel()
        elif done.exception() is not None:
            target.set_exception(done.exception())
        else:
            target.set_result(done.result())

    source.add_done_callback(copy)


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
            target: concurrent.futures.Future[Any] = concurrent.futures.Future()
            _bridge(await self.aio.send_nowait(message), target)
            return target

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
