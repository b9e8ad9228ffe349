"""Endpoint states and the one table of legal transitions for each (as h11 does).

A session's states are the spec's (2.5.5); a link's are named after its attach and
detach exchange (2.6.3, 2.6.6); a connection's are the open/close part of 2.4.6 (the
protocol-header and SASL stages before them are the frame reader's business); a
transaction's follow its declare and discharge over a control link (part 4, 4.2-4.3). Each
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
    "TRANSACTION_TRANSITIONS",
    "ConnectionState",
    "IllegalTransition",
    "LinkState",
    "SessionState",
    "Step",
    "TransactionState",
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
    transport went away. For a transaction: its control link ended ("If the control link
    is closed while there exist non-discharged transactions it created, then all such
    transactions are immediately rolled back", part 4, 4.1)."""
    DECLARE = "send or receive a declare"
    DECLARED = "the declared outcome"
    DECLARE_REFUSED = "the declare refused"
    DISCHARGE = "send or receive a discharge"
    COMMIT = "the discharge accepted, committing"
    ROLL_BACK = "roll back"
    """A discharge with ``fail``, a refused discharge, or the coordinator's own roll-back."""


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


class TransactionState(IntEnum):
    """A transaction as one end of its control link sees it (part 4): declared once,
    discharged once. The last four are ends."""

    UNDECLARED = 0
    DECLARING = 1
    """The declare is out (controller) or in (coordinator), not yet answered."""
    ACTIVE = 2
    """Declared: transactional work may name its txn-id."""
    DISCHARGING = 3
    """The discharge is out (controller) or in (coordinator), not yet answered."""
    COMMITTED = 4
    ROLLED_BACK = 5
    """Discharged with ``fail``, or rolled back by the coordinator (refused discharge, time-out,
    control link closed): none of its work took effect."""
    REFUSED = 6
    """The declare was refused: there never was a transaction."""
    IN_DOUBT = 7
    """Controller: the discharge went out and its control link ended before the answer came,
    so whether it committed is not known here."""


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

_T = TransactionState
TRANSACTION_TRANSITIONS: dict[TransactionState, dict[Step, TransactionState]] = {
    _T.UNDECLARED: {Step.DECLARE: _T.DECLARING, Step.ABANDON: _T.ROLLED_BACK},
    _T.DECLARING: {Step.DECLARED: _T.ACTIVE, Step.DECLARE_REFUSED: _T.REFUSED, Step.ABANDON: _T.ROLLED_BACK},
    _T.ACTIVE: {Step.DISCHARGE: _T.DISCHARGING, Step.ROLL_BACK: _T.ROLLED_BACK, Step.ABANDON: _T.ROLLED_BACK},
    _T.DISCHARGING: {Step.COMMIT: _T.COMMITTED, Step.ROLL_BACK: _T.ROLLED_BACK, Step.ABANDON: _T.IN_DOUBT},
    _T.COMMITTED: {Step.ABANDON: _T.COMMITTED},
    # A transaction the coordinator rolled back (a time-out) is discharged all the same: the
    # controller learns of it from the answer.
    _T.ROLLED_BACK: {Step.DISCHARGE: _T.ROLLED_BACK, Step.ROLL_BACK: _T.ROLLED_BACK, Step.ABANDON: _T.ROLLED_BACK},
    _T.REFUSED: {Step.ABANDON: _T.REFUSED},
    _T.IN_DOUBT: {Step.ABANDON: _T.IN_DOUBT},
}

State = TypeVar("State", LinkState, SessionState, ConnectionState, TransactionState)


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
