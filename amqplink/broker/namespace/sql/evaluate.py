"""Closures that evaluate a compiled SQL filter against one message, in three-valued logic.

Service Bus SQL filter semantics (syntax reference, "Property evaluation
semantics"): "A property that doesn't exist is internally evaluated as unknown";
for arithmetic and comparison operators "if either the left or right side of
operands is evaluated as unknown, then the result is unknown"; for ``[NOT] LIKE``
"if any operand is evaluated as unknown, then the result is unknown"; for
``[NOT] IN`` "if the left operand is evaluated as unknown, then the result is
unknown"; ``AND``/``OR`` follow the three-valued tables (F AND U = F, T OR U = T);
"``property IS NULL`` is evaluated as true if either the property doesn't exist or
the property's value is null". Unknown and null are both ``None`` here.

Operators "follow C# implicit conversion semantics": integers and doubles mix,
``/`` and ``%`` on integers truncate toward zero, ``+`` with a string
concatenates. Where C# would throw at evaluation (comparing a string with a number,
ordering booleans, integer division by zero, 64-bit overflow) the result here is
unknown, so the rule does not match.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from amqplink.broker.namespace.envelope import Envelope, as_text
from amqplink.codec.types import Symbol, Timestamp
from amqplink.sbwire.annotations import PARTITION_KEY, SCHEDULED_ENQUEUE_TIME, VIA_PARTITION_KEY

__all__ = [
    "PROPERTIES_FIELDS",
    "SYSTEM_PROPERTIES",
    "UNAVAILABLE_SYSTEM_PROPERTIES",
    "Pred",
    "Value",
    "all_of",
    "any_of",
    "arithmetic",
    "comparison",
    "constant",
    "is_null",
    "member_of",
    "negate",
    "signed",
    "system_property",
    "user_present",
    "user_property",
]

Value = Callable[[Envelope], Any]
Pred = Callable[[Envelope], "bool | None"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NUM, _STR, _BOOL, _TIME, _OTHER = range(5)
_MISSING: Any = object()


def _kind(v: Any) -> int:
    if isinstance(v, bool):
        return _BOOL
    if isinstance(v, Timestamp):
        return _TIME
    if isinstance(v, int | float):
        return _NUM
    if isinstance(v, str):
        return _STR
    return _OTHER


# -- properties ----------------------------------------------------------------------
def _lookup(app: dict[Any, Any] | None, name: str, folded: str) -> Any:
    """The application property ``name``; "Property names are case-insensitive"."""
    if not app:
        return _MISSING
    value = app.get(name, _MISSING)
    if value is not _MISSING:
        return value
    for key, value in app.items():
        if isinstance(key, str) and key.casefold() == folded:
            return value
    return _MISSING


def user_property(name: str) -> Value:
    """The reader of an application property (names case-insensitive); None when the message has none."""
    folded = name.casefold()

    def get(env: Envelope) -> Any:
        value = _lookup(env.application_properties, name, folded)
        return None if value is _MISSING else value

    return get


def user_present(name: str) -> Pred:
    """``EXISTS(name)``: whether the message has the application property (names case-insensitive)."""
    folded = name.casefold()
    return lambda env: _lookup(env.application_properties, name, folded) is not _MISSING


def _text(v: Any) -> Any:
    v = as_text(v)
    return v if v is None or isinstance(v, str) else str(v)


def _field(attr: str) -> Value:
    def get(env: Envelope) -> Any:
        p = env.properties
        return None if p is None else _text(getattr(p, attr))

    return get


def _annotation(key: str) -> Value:
    symbol = Symbol(key)
    return lambda env: env.annotations.get(symbol)


PROPERTIES_FIELDS = {
    "messageid": "message_id",
    "correlationid": "correlation_id",
    "to": "to",
    "replyto": "reply_to",
    "label": "subject",
    "subject": "subject",
    "sessionid": "group_id",
    "replytosessionid": "reply_to_group_id",
    "contenttype": "content_type",
}
"""``sys.`` properties (lower-cased) kept in the AMQP properties section, and its field for each."""

SYSTEM_PROPERTIES: dict[str, Value] = {
    **{name: _field(attr) for name, attr in PROPERTIES_FIELDS.items()},
    "partitionkey": _annotation(PARTITION_KEY),
    "viapartitionkey": _annotation(VIA_PARTITION_KEY),
    "scheduledenqueuetimeutc": _annotation(SCHEDULED_ENQUEUE_TIME),
}
"""``sys.`` properties a filter can read (lower-cased names) and how."""

UNAVAILABLE_SYSTEM_PROPERTIES = frozenset(
    (
        "enqueuedtimeutc", "sequencenumber", "enqueuedsequencenumber", "locktoken", "lockeduntilutc",
        "deliverycount", "expiresatutc", "size", "state", "timetolive", "deadlettersource",
    )
)  # fmt: skip
"""Service Bus system properties that are stamped after filtering, or not kept by this broker."""


def system_property(name: str) -> Value | None:
    """The reader of a system property (``sys.MessageId``, ...) by name, case-insensitively; None for an unknown one."""
    return SYSTEM_PROPERTIES.get(name.lower())


def constant(value: Any) -> Value:
    """A literal's value, the same for every message."""
    return lambda env: value


# -- comparison ----------------------------------------------------------------------
def _equal(a: Any, b: Any) -> bool | None:
    ka, kb = _kind(a), _kind(b)
    if ka != kb or (ka == _OTHER and type(a) is not type(b)):
        return None
    return bool(a == b)


_ORDERING = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def comparison(op: str, left: Value, right: Value) -> Pred:
    """``left op right`` for ``= <> != < <= > >=``."""
    if op in _ORDERING:
        test = _ORDERING[op]

        def ordered(env: Envelope) -> bool | None:
            a = left(env)
            b = right(env)
            if a is None or b is None:
                return None
            ka = _kind(a)
            if ka != _kind(b) or ka in (_BOOL, _OTHER):
                return None
            return bool(test(a, b))

        return ordered
    differ = op != "="

    def equality(env: Envelope) -> bool | None:
        a = left(env)
        b = right(env)
        if a is None or b is None:
            return None
        same = _equal(a, b)
        return None if same is None else same is not differ

    return equality


def member_of(value: Value, items: Sequence[Value], negated: bool) -> Pred:
    """``value [NOT] IN (items)``."""
    items = tuple(items)

    def run(env: Envelope) -> bool | None:
        v = value(env)
        if v is None:
            return None
        for item in items:
            if _equal(v, item(env)):
                return not negated
        return negated

    return run


def is_null(value: Value, negated: bool) -> Pred:
    """``IS NULL`` (``negated``: ``IS NOT NULL``): never unknown."""
    return lambda env: (value(env) is None) is not negated


# -- logic ---------------------------------------------------------------------------
def _connective(preds: Sequence[Pred], decisive: bool) -> Pred:
    """AND (``decisive`` False) or OR (True): one decisive operand decides; else unknown if any is."""
    preds = tuple(preds)

    def run(env: Envelope) -> bool | None:
        result: bool | None = not decisive
        for p in preds:
            v = p(env)
            if v is decisive:
                return decisive
            if v is None:
                result = None
        return result

    return run


def all_of(preds: Sequence[Pred]) -> Pred:
    """AND: "F AND U = F", "T AND U = U"."""
    return _connective(preds, False)


def any_of(preds: Sequence[Pred]) -> Pred:
    """OR: "T OR U = T", "F OR U = U"."""
    return _connective(preds, True)


def negate(pred: Pred) -> Pred:
    """``NOT``: unknown stays unknown (three-valued logic)."""
    def run(env: Envelope) -> bool | None:
        v = pred(env)
        return None if v is None else not v

    return run


# -- arithmetic ----------------------------------------------------------------------
def _int64(v: int) -> int | None:
    return v if _INT64_MIN <= v <= _INT64_MAX else None


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _numeric(a: Any, b: Any, op: str) -> Any:
    if _kind(a) != _NUM or _kind(b) != _NUM:
        return None
    if isinstance(a, int) and isinstance(b, int):
        if op in "/%" and b == 0:
            return None
        if op == "/":
            return _int64(_trunc_div(a, b))
        if op == "%":
            return _int64(a - b * _trunc_div(a, b))
        return _int64(a + b if op == "+" else a - b if op == "-" else a * b)
    a, b = float(a), float(b)
    if op in "/%" and b == 0:
        return None
    if op == "%":
        return abs(a) % abs(b) * (1 if a >= 0 else -1)
    return a + b if op == "+" else a - b if op == "-" else a * b if op == "*" else a / b


def _apply(op: str, a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if op == "+" and (isinstance(a, str) or isinstance(b, str)):
        if _kind(a) in (_STR, _NUM, _BOOL) and _kind(b) in (_STR, _NUM, _BOOL):
            return f"{a}{b}"
        return None
    return _numeric(a, b, op)


def arithmetic(first: Value, rest: Sequence[tuple[str, Value]]) -> Value:
    """``first op1 v1 op2 v2 ...`` evaluated left to right (one precedence level)."""
    rest = tuple(rest)

    def run(env: Envelope) -> Any:
        acc = first(env)
        for op, fn in rest:
            if acc is None:
                return None
            acc = _apply(op, acc, fn(env))
        return acc

    return run


def signed(value: Value, negated: bool) -> Value:
    """Unary ``-`` (or ``+``): a number, else unknown."""

    def run(env: Envelope) -> Any:
        v = value(env)
        if _kind(v) != _NUM:
            return None
        return -v if negated else v

    return run
