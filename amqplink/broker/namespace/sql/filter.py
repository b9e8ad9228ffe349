"""Service Bus SQL filters: compiled once per rule, evaluated per message.

"A SqlRuleFilter holds a SQL-like condition expression that is evaluated in the
broker against the arriving messages' user-defined properties and system
properties. All system properties ... must be prefixed with sys. in the condition
expression." The subset here: comparisons, AND/OR/NOT, [NOT] IN, [NOT] LIKE with
ESCAPE, IS [NOT] NULL, EXISTS, arithmetic, string/number/boolean/NULL constants,
``sys.``/``user.``/bare/``[delimited]`` property names (:mod:`.lexer`,
:mod:`.parser`, :mod:`.evaluate`). A message is taken only when the condition
is true; false and unknown (a missing property) do not match.

A :class:`SqlRuleAction` (``SET name = expression``, ``REMOVE name``) changes user
properties of the copy a matching rule produces. Both take ``@name`` parameters, their
values given with the rule (``SqlFilter.Parameters``, ``SqlRuleAction.Parameters``: the
SDKs key them ``"@name"``), fixed when the rule is compiled. Not supported: the functions
``newid()`` and ``property(name)``, and actions on ``sys.`` properties outside the AMQP
properties section (``sys.PartitionKey``, ``sys.ScheduledEnqueueTimeUtc``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.sql.lexer import MAX_SQL_LENGTH, SqlFilterError
from amqplink.broker.namespace.sql.parser import (
    MAX_ACTION_STATEMENTS,
    MAX_SQL_DEPTH,
    parameter_values,
    parse,
    parse_action,
)
from amqplink.codec.types import Symbol
from amqplink.protocol.definitions import Properties

__all__ = [
    "MAX_ACTION_STATEMENTS",
    "MAX_SQL_DEPTH",
    "MAX_SQL_LENGTH",
    "RULE_NAME_PROPERTY",
    "SqlFilter",
    "SqlFilterError",
    "SqlRuleAction",
]

RULE_NAME_PROPERTY = "RuleName"
"""Topic filters and actions: "Each rule with an action produces a copy of the message. This
message has a property called RuleName where the value is the name of the matching rule"."""


class _Compiled:
    """An expression compiled once, with its ``@name`` parameters; equal when both are."""

    __slots__ = ("expression", "parameters")

    def __init__(self, expression: object, parameters: Mapping[str, Any] | None = None) -> None:
        if not isinstance(expression, str):
            raise SqlFilterError(1, f"expected a string expression, not {type(expression).__name__}")
        self.expression = expression
        self.parameters = parameter_values(parameters)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.expression!r})"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, _Compiled)
            and other.expression == self.expression
            and other.parameters == self.parameters
        )

    def __hash__(self) -> int:
        return hash(self.expression)


class SqlFilter(_Compiled):
    """A compiled SQL filter expression; :class:`SqlFilterError` (with the 1-based position) if bad."""

    __slots__ = ("_predicate",)

    def __init__(self, expression: str, parameters: Mapping[str, Any] | None = None) -> None:
        super().__init__(expression, parameters)
        self._predicate: Callable[[Any], bool | None] = parse(expression, self.parameters)

    def evaluate(self, envelope: Envelope) -> bool | None:
        """True, False, or None when the condition is unknown."""
        return self._predicate(envelope)

    def matches(self, envelope: Envelope) -> bool:
        """Whether a subscription with this filter takes the message (true only, not unknown)."""
        return self._predicate(envelope) is True


def _key(app: dict[str, Any], name: str) -> str:
    """The existing key for ``name`` ("Property names are case-insensitive"), else ``name``."""
    if name in app:
        return name
    folded = name.casefold()
    return next((k for k in app if isinstance(k, str) and k.casefold() == folded), name)


class SqlRuleAction(_Compiled):
    """A compiled SQL rule action: ``SET`` and ``REMOVE`` statements, run in order, on user
    properties and on the ``sys.`` properties kept in the AMQP properties section (``sys.To``,
    ``sys.Label``, ``sys.CorrelationId``, ...; set as text)."""

    __slots__ = ("_steps",)

    def __init__(self, expression: str, parameters: Mapping[str, Any] | None = None) -> None:
        super().__init__(expression, parameters)
        self._steps = parse_action(expression, self.parameters)

    def apply(self, envelope: Envelope, rule_name: str) -> Envelope:
        """The copy of ``envelope`` the rule ``rule_name`` puts on its subscription."""
        app: dict[str, Any] = dict(envelope.application_properties or {})
        view = Envelope(envelope.header, envelope.annotations, envelope.properties, app, b"", b"")
        for name, system, value in self._steps:
            result = None if value is None else value(view)
            if system:
                props = copy.copy(view.properties) if view.properties is not None else Properties()
                setattr(props, name, _as_field(name, result))
                view.properties = props
            elif value is None:
                app.pop(_key(app, name), None)
            else:
                app[_key(app, name)] = result
        app[_key(app, RULE_NAME_PROPERTY)] = rule_name
        return envelope.with_head(view.properties, app)


def _as_field(attr: str, value: Any) -> Any:
    """``value`` as the AMQP properties field ``attr`` holds it (text; a symbol for content-type)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return Symbol(text) if attr == "content_type" else text
