"""Endpoint states and the one table of legal transitions for each (as h11 does).

A session's states are the spec's (2.5.5); a link's are named after its attach and
detach exchange (2.6.3, 2.6.6); a connection's are the open/close part of 2.4.6 (the
protocol-header and SASL stages before them are the frame reader's business). Each
scope also has a terminal ``ENDED`` (the spec's diagrams return to UNMAPPED /
DETACHED / END): it keeps an ended endpoint from looking like a new one.

Every change of state goes through :func:`advance`, which looks the step up in the
scope's table and refuses any step the table does not hold with
:class:`IllegalTransition` (the engine answers a peer's illegal step with
``amqp:illegal-state``; an application's, with :class:`~amqplink.engine.errors.EngineStateError`).

The values are ordered so that a hot path can test a range with one comparison
(``state >= LinkState.DETACH_SENT``: "this side has detached").
"""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import TypeVar

from amqplink.engine.errors import EngineStateError

__all__ = [
    "CONNECTION_TRANSITIONS",
    "LINK_TRANSITIONS",
    "SESSION_TRANSITIONS",
    "ConnectionState",
    "IllegalTransition",
    "LinkState",
    "SessionState",
    "Step",
    "advance",
]


class Step(Enum):
    """What moves an endpoint: a performative sent or received, or its scope ending."""

    SEND_OPEN = "send open"
    RECV_OPEN = "receive open"
    SEND_CLOSE = "send close"
    SEND_CLOSE_ERROR = "send close with an error"
    RECV_CLOSE = "receive close"
    SEND_BEGIN = "send begin"
    RECV_BEGIN = "receive begin"
    SEND_END = "send end"
    SEND_END_ERROR = "send end with an error"
    RECV_END = "receive end"
    SEND_ATTACH = "send attach"
    RECV_ATTACH = "receive attach"
    SEND_DETACH = "send detach"
    RECV_DETACH = "receive detach"
    ABANDON = "end with the enclosing scope"
    """The session ended or the connection closed under this endpoint (2.5.5: ending a
    session detaches its links; 2.4.3: closing a connection ends its sessions), or the
    transport went away."""


class LinkState(IntEnum):
    """A link endpoint (2.6.3 attach, 2.6.6 detach)."""

    DETACHED = 0
    """Nothing exchanged yet."""
    ATTACH_SENT = 1
    ATTACH_RCVD = 2
    ATTACHED = 3
    DETACH_RCVD = 4
    DETACH_SENT = 5
    ENDED = 6
    """Both detaches exchanged, or the session or connection ended under the link."""


class SessionState(IntEnum):
    """A session endpoint, with the spec's state names (2.5.5)."""

    UNMAPPED = 0
    BEGIN_SENT = 1
    BEGIN_RCVD = 2
    MAPPED = 3
    END_RCVD = 4
    END_SENT = 5
    DISCARDING = 6
    """"a variant of the END_SENT state where the end is triggered by an error. In this
    case any incoming frames on the session MUST be silently discarded until the peer's
    end frame is received." (2.5.5)"""
    ENDED = 7
    """Both ends exchanged, or the connection closed under the session."""


class ConnectionState(IntEnum):
    """A connection endpoint after the protocol headers (2.4.6)."""

    START = 0
    OPEN_SENT = 1
    OPEN_RCVD = 2
    OPENED = 3
    CLOSE_RCVD = 4
    CLOSE_SENT = 5
    DISCARDING = 6
    """Close sent with an error: "incoming frames ... MUST be silently discarded until
    the peer's close frame is received" (2.4.6)."""
    END = 7
    """Both closes exchanged, or the transport ended."""


_L = LinkState
LINK_TRANSITIONS: dict[LinkState, dict[Step, LinkState]] = {
    _L.DETACHED: {Step.SEND_ATTACH: _L.ATTACH_SENT, Step.RECV_ATTACH: _L.ATTACH_RCVD, Step.ABANDON: _L.ENDED},
    _L.ATTACH_SENT: {Step.RECV_ATTACH: _L.ATTACHED, Step.SEND_DETACH: _L.DETACH_SENT, Step.ABANDON: _L.ENDED},
    # No detach before this side's attach: a refusal is an attach (null terminus), then
    # a detach (2.6.3); Link.detach sends both.
    _L.ATTACH_RCVD: {Step.SEND_ATTACH: _L.ATTACHED, Step.RECV_DETACH: _L.DETACH_RCVD, Step.ABANDON: _L.ENDED},
    _L.ATTACHED: {Step.SEND_DETACH: _L.DETACH_SENT, Step.RECV_DETACH: _L.DETACH_RCVD, Step.ABANDON: _L.ENDED},
    # The peer detached an attach this side had not answered: answer it, then detach.
    _L.DETACH_RCVD: {Step.SEND_ATTACH: _L.DETACH_RCVD, Step.SEND_DETACH: _L.ENDED, Step.ABANDON: _L.ENDED},
    # The peer's answer to an attach this side detached before it arrived.
    _L.DETACH_SENT: {Step.RECV_ATTACH: _L.DETACH_SENT, Step.RECV_DETACH: _L.ENDED, Step.ABANDON: _L.ENDED},
    _L.ENDED: {Step.ABANDON: _L.ENDED},
}

_S = SessionState
_SESSION_ENDS = {Step.SEND_END: _S.END_SENT, Step.SEND_END_ERROR: _S.DISCARDING, Step.ABANDON: _S.ENDED}
SESSION_TRANSITIONS: dict[SessionState, dict[Step, SessionState]] = {
    _S.UNMAPPED: {Step.SEND_BEGIN: _S.BEGIN_SENT, Step.RECV_BEGIN: _S.BEGIN_RCVD, Step.ABANDON: _S.ENDED},
    _S.BEGIN_SENT: {Step.RECV_BEGIN: _S.MAPPED, **_SESSION_ENDS},
    _S.BEGIN_RCVD: {Step.SEND_BEGIN: _S.MAPPED, Step.ABANDON: _S.ENDED},
    _S.MAPPED: {Step.RECV_END: _S.END_RCVD, **_SESSION_ENDS},
    _S.END_RCVD: {Step.SEND_END: _S.ENDED, Step.SEND_END_ERROR: _S.ENDED, Step.ABANDON: _S.ENDED},
    _S.END_SENT: {Step.RECV_END: _S.ENDED, Step.ABANDON: _S.ENDED},
    _S.DISCARDING: {Step.RECV_END: _S.ENDED, Step.ABANDON: _S.ENDED},
    _S.ENDED: {Step.ABANDON: _S.ENDED},
}

_C = ConnectionState
_CLOSES = {Step.SEND_CLOSE: _C.CLOSE_SENT, Step.SEND_CLOSE_ERROR: _C.DISCARDING, Step.ABANDON: _C.END}
CONNECTION_TRANSITIONS: dict[ConnectionState, dict[Step, ConnectionState]] = {
    _C.START: {Step.SEND_OPEN: _C.OPEN_SENT, Step.RECV_OPEN: _C.OPEN_RCVD, Step.ABANDON: _C.END},
    # OC_PIPE: a close may be pipelined behind the open; a peer may refuse before its open.
    _C.OPEN_SENT: {Step.RECV_OPEN: _C.OPENED, Step.RECV_CLOSE: _C.CLOSE_RCVD, **_CLOSES},
    _C.OPEN_RCVD: {Step.SEND_OPEN: _C.OPENED, Step.ABANDON: _C.END},
    _C.OPENED: {Step.RECV_CLOSE: _C.CLOSE_RCVD, **_CLOSES},
    _C.CLOSE_RCVD: {Step.SEND_CLOSE: _C.END, Step.SEND_CLOSE_ERROR: _C.END, Step.ABANDON: _C.END},
    _C.CLOSE_SENT: {
        Step.RECV_OPEN: _C.CLOSE_SENT,
        Step.RECV_CLOSE: _C.END,
        Step.SEND_CLOSE_ERROR: _C.DISCARDING,  # the peer broke a rule while we waited
        Step.ABANDON: _C.END,
    },
    _C.DISCARDING: {Step.RECV_CLOSE: _C.END, Step.ABANDON: _C.END},
    _C.END: {Step.ABANDON: _C.END},
}

State = TypeVar("State", LinkState, SessionState, ConnectionState)


class IllegalTransition(EngineStateError):
    """A step the endpoint's state does not allow (``amqp:illegal-state`` when the peer
    took it)."""

    def __init__(self, what: str, state: IntEnum, step: Step) -> None:
        super().__init__(f"{what}: cannot {step.value} in state {state.name}")
        self.state = state
        self.step = step


def advance(table: dict[State, dict[Step, State]], state: State, step: Step, what: str) -> State:
    """The state after ``step``, or :class:`IllegalTransition` naming ``what``."""
    nxt = table[state].get(step)
    if nxt is None:
        raise IllegalTransition(what, state, step)
    return nxt
