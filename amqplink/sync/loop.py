"""The blocking facade's event loop: driven by the calling threads, kept by a keeper thread.

One loop per process (a forked child makes its own: connections do not cross ``fork``).
A blocking call runs its operation on that loop *in the calling thread* when no one else
runs the loop: it takes the driver's role, runs the loop until its operation ends, and
leaves it stopped. Calls made back to back therefore cross no thread at all (no self-pipe
write, no lock wake-up, no GIL hand-over between threads).

Between calls a keeper thread takes the loop over once no caller has driven it for
:data:`IDLE` seconds, so heartbeats, prefetch, lock renewal and other background tasks go on
while the caller's own code runs; a caller that arrives while the keeper drives asks it to
stop (one hop, only after idleness) and then drives. A caller that arrives while another
caller drives hands its call to the running loop (the inbox, one ``call_soon_threadsafe``)
and waits; when the driver leaves, it hands the role to the one caller waiting for a call
still under way, or, when several wait (threads contending for one connection), to the
keeper, which serves them one hop per call as a loop thread of its own would, until one
is left. A thread running another asyncio loop cannot run this one: the keeper serves
it. asyncio lets one loop be run by different threads one after another
(``run_forever`` sets and clears the thread's running loop), never by two at once: the
driver's role, taken under one mutex, guarantees that.

Ctrl-C in the main thread while it drives is caught at the loop's edge, not in the middle
of a callback: the operation is cancelled (as a time-out cancels it), the loop runs until
the cancellation is through, then ``KeyboardInterrupt`` is raised (a second Ctrl-C stops
waiting for the cancellation; the keeper finishes it). While it waits for another driver,
Ctrl-C ends the wait and cancels the operation. Python's default SIGINT handler is swapped
for the facade's only during a main-thread call; an application's own is left alone.
"""

from __future__ import annotations

import _thread
import asyncio
import collections
import concurrent.futures
import importlib
import os
import selectors
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import FrameType
from typing import Any, TypeVar

__all__ = ["IDLE", "Begin", "DrivenLoop", "Notify", "current", "run", "submit", "wait"]

T = TypeVar("T")

IDLE = 0.002
"""Seconds without a calling thread driving the loop before the keeper takes it over (it
looks every IDLE seconds while callers drive, so it takes over after one to two IDLE)."""

_signal: Any = importlib.import_module("_signal")
"""The C module under :mod:`signal`: its functions without the enum conversions, which
cost more than the rest of a blocking call's bookkeeping."""


class _ReleasingSelector(selectors.DefaultSelector):
    """The loop's selector: it releases the waiting callers whose calls ended in this loop
    turn just before the loop waits for I/O. Released at once, a caller would wake only to
    wait for the GIL, which the driving thread holds until that wait: two wake-ups per call
    where one does."""

    def __init__(self) -> None:
        super().__init__()
        self.finished: list[_thread.LockType] = []

    def release_finished(self) -> None:
        finished = self.finished
        if finished:
            self.finished = []
            for done in finished:
                done.release()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.release_finished()
        return super().select(timeout)


_KEEPER = "keeper"
"""The driver's role held by the keeper thread (a caller holds it as its :class:`_Call`)."""


class DrivenLoop:
    """The process's event loop, its driver's role and its keeper thread."""

    def __init__(self) -> None:
        self.selector = _ReleasingSelector()
        self.loop: asyncio.AbstractEventLoop = asyncio.SelectorEventLoop(self.selector)
        self.pid = os.getpid()
        self._mutex = threading.Lock()
        self._driver: _Call | str | None = None
        self._waiters: dict[_Call, None] = {}  # calls handed to the loop whose callers wait
        self._drives = 0  # drives ended: the keeper's measure of idleness
        self._urgent = False  # the keeper is to take the loop over at once
        self._parked = False  # the keeper sleeps until the current drive ends
        self._nudge = _thread.allocate_lock()
        self._nudge.acquire()
        self._main_call: _Call | None = None  # the main thread's call, while Ctrl-C is caught
        self._inbox: collections.deque[_Call] = collections.deque()
        self._draining = False
        self.thread = threading.Thread(target=self._run_keeper, name="amqplink-loop", daemon=True)
        self.thread.start()

    # -- a blocking call -----------------------------------------------------------------
    def wait(self, begin: Begin, timeout: float | None) -> Any:
        """Run what ``begin`` starts and wait for its outcome (at most ``timeout`` s: then it is
        cancelled and ``TimeoutError`` raised): on this thread if no one drives the loop."""
        running = asyncio._get_running_loop()
        if running is self.loop:
            _close(begin)
            raise RuntimeError("amqplink.sync called from its own event loop: use amqplink.aio there")
        call = _Call(begin, self)
        call.timeout = timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        previous = self._catch_interrupts(call)
        try:
            with self._mutex:
                driver = self._driver
                if driver is None and running is None:
                    self._driver = call
                else:
                    call.can_drive = running is None  # a thread running another loop cannot run this one
                    self._waiters[call] = None
                    if driver is None:
                        self._wake_keeper(urgent=True)
            if driver is None and running is None:
                return self._drive(call, deadline, start=True)
            # Handed to the loop outside the mutex (the self-pipe write lets the GIL go); a
            # caller handed the role meanwhile finds the call's start ready when it drives.
            self._submit(call)
            return self._await(call, deadline)
        finally:
            if previous is not None:
                self._main_call = None
                _signal.signal(signal.SIGINT, previous)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop without waiting for it (the keeper runs it at once if
        no one drives the loop)."""
        if asyncio._get_running_loop() is self.loop:
            coro.close()
            raise RuntimeError("amqplink.sync called from its own event loop: use amqplink.aio there")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        with self._mutex:
            if self._driver is None:
                self._wake_keeper(urgent=True)
        return future

    def _submit(self, call: _Call) -> None:
        """Have the driving thread start ``call``: one wake-up (``call_soon_threadsafe``, a byte
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
        if self._driver is _KEEPER and len(self._waiters) <= 1:
            self.loop.stop()  # one caller waits: the keeper hands it the loop

    def _await(self, call: _Call, deadline: float | None) -> Any:
        """Wait for ``call``, handed to the loop, to end, or for the driver's role."""
        try:
            call.waiting = True  # Ctrl-C raises in the wait (only there)
            if call.interrupts:
                raise KeyboardInterrupt
            got = call.done_lock.acquire(True, -1 if deadline is None else max(0.0, deadline - time.monotonic()))
            call.waiting = False
        except BaseException:  # KeyboardInterrupt while waiting
            call.waiting = False
            self._give_up(call)
            raise
        if not got:
            self._give_up(call)
            raise TimeoutError(f"amqplink.sync call did not finish within {call.timeout} s")
        if call.role_handed:
            return self._drive(call, deadline)
        self._waiters.pop(call, None)  # no mutex: the driver's role is not decided by a call done
        return call.outcome()

    def _give_up(self, call: _Call) -> None:
        """The caller stops waiting (time-out, Ctrl-C): its operation is cancelled."""
        with self._mutex:
            role_handed = call.role_handed
            if not role_handed:
                self._waiters.pop(call, None)
        if role_handed:  # the role came with the wake-up we no longer waited for: the loop is ours
            call.abandon()
            self._leave()
        else:
            self.loop.call_soon_threadsafe(call.abandon)

    def _drive(self, call: _Call, deadline: float | None, start: bool = False) -> Any:
        """Run the loop on this thread until ``call`` ends (or its deadline passes), then
        leave the role. ``start``: the call is started here first, as from a callback (the
        loop is this thread's running loop meanwhile), not in a loop turn of its own."""
        loop = self.loop
        call.driven = True
        timer = None
        try:
            if start:
                asyncio._set_running_loop(loop)
                try:
                    call.start()
                finally:
                    asyncio._set_running_loop(None)
            if deadline is not None:
                timer = loop.call_at(deadline, call.expire)
            while not call.done and not call.expired and call.interrupts < 2:
                if call.interrupts:
                    call.abandon()  # a second Ctrl-C stops waiting for the cancellation
                loop.run_forever()
        finally:
            if timer is not None:
                timer.cancel()
            call.driven = False  # a cancellation ending later must not stop the next driver's loop
            self._leave()
        if call.interrupts:
            raise KeyboardInterrupt
        if call.expired and not call.succeeded:
            raise TimeoutError(f"amqplink.sync call did not finish within {call.timeout} s")
        return call.outcome()

    def _leave(self, keeper: bool = False) -> bool:
        """Give up the driver's role (the loop is stopped). A lone caller waiting for a call
        still under way gets it; several (threads contending for one connection) get the
        keeper, which then serves them as one loop thread does, each call a hop, until one
        caller is left: True tells the keeper to drive on. With no one waiting, the role is
        free: the keeper takes it after :data:`IDLE`. Callbacks left ready (the turn's
        deferred flush) run in the next drive's first turn, with the next call's writes."""
        with self._mutex:
            self.selector.release_finished()
            self._drives += 1
            waiting = [waiter for waiter in list(self._waiters) if not waiter.done]  # list(): one step
            if len(waiting) == 1 and waiting[0].can_drive:
                waiter = waiting[0]
                del self._waiters[waiter]
                self._driver = waiter
                waiter.role_handed = True
                waiter.done_lock.release()
                return False
            if waiting:
                if keeper:
                    return True
                self._driver = _KEEPER  # reserved: the keeper runs the loop at once
                self._wake_keeper(urgent=True)
                return False
            self._driver = None
            if self._parked:
                self._wake_keeper(urgent=False)
            return False

    def _wake_keeper(self, urgent: bool) -> None:
        """(Under the mutex.) Wake the keeper thread; ``urgent``: to take the loop at once."""
        self._urgent = self._urgent or urgent
        self._parked = False
        if self._nudge.locked():
            self._nudge.release()

    # -- Ctrl-C --------------------------------------------------------------------------
    def _catch_interrupts(self, call: _Call) -> Any:
        """In the main thread, with Python's own SIGINT handler in place: Ctrl-C during
        ``call`` is caught where it is safe to stop (the loop's edge, the wait on a lock),
        not in the middle of a callback. The handler it replaced (to put back), or None."""
        if _thread.get_ident() != threading.main_thread().ident:
            return None
        previous = _signal.getsignal(signal.SIGINT)
        if previous is not _signal.default_int_handler:
            return None  # the application's own handler: left as it is
        self._main_call = call
        _signal.signal(signal.SIGINT, self._interrupted)
        return previous

    def _interrupted(self, signum: int, frame: FrameType | None) -> None:
        call = self._main_call
        if call is None:
            raise KeyboardInterrupt
        call.interrupts += 1
        if call.waiting:
            raise KeyboardInterrupt
        self.loop.call_soon_threadsafe(self.loop.stop)  # wakes the selector's wait

    # -- the keeper ----------------------------------------------------------------------
    def _run_keeper(self) -> None:
        """The keeper thread: run the loop whenever no caller has driven it for :data:`IDLE`
        s, or when several callers wait (the role is then reserved for it)."""
        asyncio.set_event_loop(self.loop)
        seen = -1
        while True:
            with self._mutex:
                take = self._driver is _KEEPER or (self._driver is None and (self._urgent or self._drives == seen))
                if take:
                    self._driver = _KEEPER
                    self._urgent = False
                elif self._driver is not None and self._drives == seen:
                    self._parked = True  # one drive all along: sleep until it ends
                seen = self._drives
                parked = self._parked
            if take:
                self._drive_on()  # then, if the role is free, idle for IDLE before taking it again
                with self._mutex:
                    seen = self._drives
                    parked = False
            self._nudge.acquire(True, -1 if parked else IDLE)

    def _drive_on(self) -> None:
        """The keeper runs the loop until it has no more reason to."""
        keep = True
        while keep:
            try:
                self.loop.run_forever()
            except BaseException as exc:  # SystemExit from a Task: its call was told; the keeper goes on
                self.loop.call_exception_handler({"message": "amqplink.sync keeper", "exception": exc})
            keep = self._leave(keeper=True)


Notify = Callable[[BaseException | None], None]
"""Told once, on the loop, how an operation started by a callback ended (None: done)."""
Begin = Callable[[Notify], Awaitable[Any] | None]
"""Starts a blocking call's operation on the loop: a coroutine (run as a Task), a future
(waited for as it is; one with a ``report_to(callback)`` method calls back as it is
decided), or None when it will tell the :data:`Notify` it is given."""


class _Call:
    """One blocking call: its operation, started on the loop, and how its caller waits: by
    driving the loop itself (``driven``: the operation's end stops the loop) or on a bare
    lock, released when the operation ends or when the driver's role is handed to it.

    No ``concurrent.futures.Future`` (its condition variable), none of
    ``run_coroutine_threadsafe``'s chaining callbacks, and no Task at all when the operation
    is a future (a settlement) or reports to a callback (a send on the fast path)."""

    __slots__ = (
        "_abandoned",
        "_begin",
        "_error",
        "_owner",
        "_pending",
        "_value",
        "can_drive",
        "done",
        "done_lock",
        "driven",
        "expired",
        "interrupts",
        "role_handed",
        "timeout",
        "waiting",
    )

    def __init__(self, begin: Begin, owner: DrivenLoop) -> None:
        self._begin: Begin | None = begin
        self._owner = owner
        self.done_lock = _thread.allocate_lock()
        self.done_lock.acquire()
        self._pending: asyncio.Future[Any] | None = None
        self._value: Any = None
        self._error: BaseException | None = None
        self._abandoned = False
        self.done = False
        self.driven = False
        self.role_handed = False
        self.expired = False
        self.can_drive = True
        self.waiting = False
        self.interrupts = 0
        self.timeout: float | None = None

    def start(self) -> None:
        """On the loop: start the operation (unless the caller gave up meanwhile)."""
        begin, self._begin = self._begin, None
        assert begin is not None
        if self._abandoned:
            _close(begin)
            self.notify(concurrent.futures.CancelledError())
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
        # The call ends from the Task's last step itself (a done-callback would cost the
        # loop one more iteration per call).
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
        """The operation ended (with ``error``): a driving caller's loop stops after this
        turn; a waiting caller is released before the loop next waits for I/O (see
        :class:`_ReleasingSelector`)."""
        if self.done:
            return
        self.done = True
        self._error = error
        self._pending = None
        if self.driven:
            self._owner.loop.stop()
        else:
            self._owner.selector.finished.append(self.done_lock)

    @property
    def succeeded(self) -> bool:
        return self.done and self._error is None

    def abandon(self) -> None:
        """On the loop (or by the driver's role holder): the caller gave up; cancel the
        operation (or never start it)."""
        if self._abandoned:
            return
        self._abandoned = True
        pending = self._pending
        if pending is not None and pending.cancel() and not isinstance(pending, asyncio.Task):
            self._finished(pending)  # a future reporting to a callback is not told of its cancellation

    def expire(self) -> None:
        """On the loop: the driving caller's deadline passed."""
        self.expired = True
        self.abandon()
        self._owner.loop.stop()

    def outcome(self) -> Any:
        """The operation's result; raise its exception."""
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


_lock = threading.Lock()
_current: DrivenLoop | None = None


def _forget_after_fork() -> None:
    """In a forked child: the parent's loop (and a lock another thread may have held at the
    fork) are not the child's; it makes its own on first use."""
    global _current, _lock
    _current = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def current() -> DrivenLoop:
    """This process's loop (made on first use, and again in a forked child)."""
    global _current
    loop = _current
    if loop is not None and loop.pid == os.getpid():
        return loop
    with _lock:
        if _current is None or _current.pid != os.getpid():
            _current = DrivenLoop()
        return _current


def wait(begin: Begin, timeout: float | None = None) -> Any:
    """Start ``begin`` on the loop and wait for what it started (at most ``timeout`` s: then
    it is cancelled and ``TimeoutError`` raised)."""
    return current().wait(begin, timeout)


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the loop and wait for its result (at most ``timeout`` s: then it is
    cancelled and ``TimeoutError`` raised)."""
    result: T = current().wait(_Given(coro), timeout)
    return result


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start ``coro`` on the loop; a future for its result."""
    return current().submit(coro)
