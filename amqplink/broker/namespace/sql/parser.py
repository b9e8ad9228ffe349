"""Parse a Service Bus SQL filter into evaluation closures (:mod:`.evaluate`), once per rule.

The grammar (SQL filter syntax reference)::

    <predicate> ::= NOT <predicate> | <predicate> AND <predicate> | <predicate> OR <predicate>
        | <expression> { = | <> | != | > | >= | < | <= } <expression>
        | <property> IS [NOT] NULL | <expression> [NOT] IN ( <expression> [, ...n] )
        | <expression> [NOT] LIKE <pattern> [ESCAPE <escape_char>]
        | EXISTS ( <property> ) | ( <predicate> )
    <expression> ::= <constant> | <property> | <expression> { + | - | * | / | % } <expression>
        | { + | - } <expression> | ( <expression> )
    <property> := [<scope> .] <property_name>       (scope: sys or user; user if omitted)
    <constant> ::= <number> | <string> | TRUE | FALSE | NULL | @<parameter_name>

Precedence, loosest first: OR, AND, NOT, comparison/IN/LIKE/IS, ``+ -``, ``* / %``,
unary ``+ -``. ``TRUE`` and ``FALSE`` are values and conditions. "An attempt to
access a non-existent system property is an error": an unknown ``sys.`` name is
refused here. Nesting (parentheses, NOT, unary signs) is bounded by
:data:`MAX_SQL_DEPTH` so that a hostile rule cannot exhaust the stack; chains of
AND, OR and arithmetic are flat.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from amqplink.broker.namespace.sql import evaluate as ev
from amqplink.broker.namespace.sql.lexer import SqlFilterError, Token, tokenize
from amqplink.broker.namespace.sql.like import LikeBudget, bounded, like, like_matcher
from amqplink.codec.types import Timestamp

__all__ = ["MAX_ACTION_STATEMENTS", "MAX_SQL_DEPTH", "ActionStep", "parameter_values", "parse", "parse_action"]

MAX_SQL_DEPTH = 32
"""Parentheses, NOT and signs nested deeper than this are refused."""
MAX_ACTION_STATEMENTS = 32
"""Service Bus quotas: "Maximum number of expressions per rule action: 32"."""

ActionStep = tuple[str, bool, "Callable[[Any], Any] | None"]
"""A rule action's statement: the user property's name (or, when the flag is set, the AMQP
properties field of a ``sys.`` property) and its new value (None: REMOVE)."""

_COMPARISONS = frozenset(("=", "<>", "!=", "<", "<=", ">", ">="))
_NOT_CONSTANT: Any = object()
_NOT_A_VALUE = (
    ")",
    ",",
    "=",
    "<>",
    "!=",
    "<",
    ">",
    "<=",
    ">=",
    "*",
    "/",
    "%",
    "AND",
    "OR",
    "IN",
    "LIKE",
    "IS",
    "ESCAPE",
)
_CONDITION = "a condition (a comparison, IN, LIKE, IS NULL or EXISTS)"


@dataclass(slots=True)
class _Node:
    fn: Callable[[Any], Any]
    pos: int
    is_condition: bool
    is_value: bool
    const: Any = _NOT_CONSTANT
    property: str | None = None
    """The property's display name when the node is one bare property."""
    present: Callable[[Any], Any] | None = None
    system: bool = False


def parameter_values(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """A rule's parameters by the name an expression uses, folded (``@Param1`` and
    ``param1`` are the same parameter: the SDKs key them with the ``@``); a ``datetime``
    as the AMQP timestamp a message's property holds (so that the two compare)."""
    out: dict[str, Any] = {}
    for name, value in (parameters or {}).items():
        if not isinstance(name, str) or not name.lstrip("@"):
            raise SqlFilterError(1, f"a parameter name must be text such as '@name', not {name!r}")
        out[name.lstrip("@").casefold()] = Timestamp.from_datetime(value) if isinstance(value, datetime) else value
    return out


class _Parser:
    def __init__(self, text: str, parameters: Mapping[str, Any] | None = None) -> None:
        self.parameters = parameter_values(parameters)
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0
        self.budget: LikeBudget | None = None
        """The steps an evaluation may spend in LIKE (made with the first LIKE; :mod:`.like`)."""

    # -- tokens --
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def _next(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def _is(self, kind: str, *texts: str) -> bool:
        tok = self.tokens[self.i]
        return tok.kind == kind and (not texts or tok.text in texts)

    def fail(self, what: str, after: Token | None = None) -> SqlFilterError:
        where = "" if after is None else f" after {after.text!r}"
        return SqlFilterError(self.tok.pos, f"expected {what}{where}, found {self.tok.describe()}")

    def _expect_op(self, op: str, after: Token | None = None) -> Token:
        if not self._is("op", op):
            raise self.fail(repr(op), after)
        return self._next()

    def _nest(self, at: Token) -> None:
        self.depth += 1
        if self.depth > MAX_SQL_DEPTH:
            raise SqlFilterError(at.pos, f"the expression nests deeper than {MAX_SQL_DEPTH} levels")

    @staticmethod
    def _condition(node: _Node, after: Token | None = None) -> Callable[[Any], Any]:
        if not node.is_condition:
            where = "" if after is None else f" after {after.text!r}"
            raise SqlFilterError(node.pos, f"expected {_CONDITION}{where}, found a value")
        return node.fn

    @staticmethod
    def _value(node: _Node, where: str = "") -> Callable[[Any], Any]:
        if not node.is_value:
            raise SqlFilterError(node.pos, f"expected a value{where}, found a condition")
        return node.fn

    # -- grammar --
    def parse(self) -> Callable[[Any], Any]:
        if self._is("end"):
            raise self.fail(_CONDITION)
        node = self.or_expr()
        if not self._is("end"):
            raise self.fail("AND, OR or the end of the expression" if node.is_condition else "an operator")
        return self._condition(node)

    def _chain(self, keyword: str, operand: Callable[[], _Node], combine: Callable[[Any], Any]) -> _Node:
        first = operand()
        if not self._is("keyword", keyword):
            return first
        fns = [self._condition(first)]
        while self._is("keyword", keyword):
            op = self._next()
            fns.append(self._condition(self._operand(operand, op), op))
        return _Node(combine(fns), first.pos, True, False)

    def _operand(self, operand: Callable[[], _Node], after: Token) -> _Node:
        if self._is("end") or self._is("op", ")", ","):
            raise self.fail(_CONDITION, after)
        return operand()

    def or_expr(self) -> _Node:
        return self._chain("OR", self.and_expr, ev.any_of)

    def and_expr(self) -> _Node:
        return self._chain("AND", self.not_expr, ev.all_of)

    def not_expr(self) -> _Node:
        if not self._is("keyword", "NOT"):
            return self.predicate()
        op = self._next()
        self._nest(op)
        inner = self._condition(self._operand(self.not_expr, op), op)
        self.depth -= 1
        return _Node(ev.negate(inner), op.pos, True, False)

    def predicate(self) -> _Node:
        left = self.additive()
        tok = self.tok
        if tok.kind == "op" and tok.text in _COMPARISONS:
            self._next()
            right = self._value(self._primary_operand(self.additive, tok), f" after {tok.text!r}")
            left_fn = self._value(left, f" before {tok.text!r}")
            return _Node(ev.comparison(tok.text, left_fn, right), left.pos, True, False)
        if tok.kind != "keyword" or tok.text not in ("NOT", "IN", "LIKE", "IS"):
            return left
        if tok.text == "IS":
            self._next()
            negated = self._is("keyword", "NOT")
            last = self._next() if negated else tok
            if not self._is("keyword", "NULL"):
                raise self.fail("NULL", last)
            self._next()
            if left.property is None:
                raise SqlFilterError(left.pos, "IS NULL applies to a property, not to an expression")
            return _Node(ev.is_null(left.fn, negated), left.pos, True, False)
        negated = tok.text == "NOT"
        if negated:
            self._next()
            if not self._is("keyword", "IN", "LIKE"):
                raise self.fail("IN or LIKE", tok)
        value = self._value(left, f" before {self.tok.text}")
        if self.tok.text == "IN":
            return _Node(ev.member_of(value, self._in_list(self._next()), negated), left.pos, True, False)
        return self._like(value, left.pos, self._next(), negated)

    def _in_list(self, in_tok: Token) -> list[Callable[[Any], Any]]:
        opened = self._expect_op("(", in_tok)
        items = [self._value(self._primary_operand(self.additive, opened), " in the IN list")]
        while self._is("op", ","):
            comma = self._next()
            items.append(self._value(self._primary_operand(self.additive, comma), " in the IN list"))
        if not self._is("op", ")"):
            raise self.fail("',' or ')' in the IN list")
        self._next()
        return items

    def _like(self, value: Callable[[Any], Any], pos: int, like_tok: Token, negated: bool) -> _Node:
        pattern = self._primary_operand(self.additive, like_tok)
        escape: _Node | None = None
        if self._is("keyword", "ESCAPE"):
            escape_tok = self._next()
            escape = self._primary_operand(self.additive, escape_tok)
            if escape.const is not _NOT_CONSTANT and (not isinstance(escape.const, str) or len(escape.const) != 1):
                raise SqlFilterError(escape.pos, "the ESCAPE character must be a string of length 1")
        fixed = None
        if isinstance(pattern.const, str) and (escape is None or isinstance(escape.const, str)):
            try:
                fixed = like_matcher(pattern.const, None if escape is None else escape.const)
            except ValueError as exc:
                raise SqlFilterError(pattern.pos, str(exc)) from None
        elif pattern.const is not _NOT_CONSTANT:
            raise SqlFilterError(pattern.pos, "the LIKE pattern must be a string")
        esc_fn = None if escape is None else self._value(escape)
        pattern_fn = self._value(pattern, " after LIKE")
        if self.budget is None:
            self.budget = LikeBudget()
        return _Node(like(value, pattern_fn, esc_fn, negated, fixed, self.budget), pos, True, False)

    def _primary_operand(self, operand: Callable[[], _Node], after: Token) -> _Node:
        if self._is("end") or self._is("op", *_NOT_A_VALUE) or self._is("keyword", *_NOT_A_VALUE):
            raise self.fail("a value", after)
        return operand()

    def _arith_chain(self, ops: tuple[str, ...], operand: Callable[[], _Node]) -> _Node:
        first = operand()
        if not (self._is("op") and self.tok.text in ops):
            return first
        first_fn = self._value(first, f" before {self.tok.text!r}")
        rest = []
        while self._is("op") and self.tok.text in ops:
            op = self._next()
            rest.append((op.text, self._value(self._primary_operand(operand, op), f" after {op.text!r}")))
        return _Node(ev.arithmetic(first_fn, rest), first.pos, False, True)

    def additive(self) -> _Node:
        return self._arith_chain(("+", "-"), self.multiplicative)

    def multiplicative(self) -> _Node:
        return self._arith_chain(("*", "/", "%"), self.unary)

    def unary(self) -> _Node:
        if not self._is("op", "+", "-"):
            return self.primary()
        sign = self._next()
        self._nest(sign)
        inner = self._primary_operand(self.unary, sign)
        fn = self._value(inner, f" after {sign.text!r}")
        self.depth -= 1
        negated = sign.text == "-"
        if isinstance(inner.const, int | float) and not isinstance(inner.const, bool):
            value = -inner.const if negated else inner.const
            return _Node(ev.constant(value), sign.pos, False, True, value)
        return _Node(ev.signed(fn, negated), sign.pos, False, True)

    def primary(self) -> _Node:
        tok = self.tok
        if tok.kind in ("number", "string"):
            self._next()
            return _Node(ev.constant(tok.value), tok.pos, False, True, tok.value)
        if tok.kind == "keyword" and tok.text in ("TRUE", "FALSE", "NULL"):
            self._next()
            value = {"TRUE": True, "FALSE": False, "NULL": None}[tok.text]
            return _Node(ev.constant(value), tok.pos, tok.text != "NULL", True, value)
        if tok.kind == "keyword" and tok.text == "EXISTS":
            self._next()
            opened = self._expect_op("(", tok)
            if not self._is("ident") and not self._is("name"):
                raise self.fail("a property name", opened)
            prop = self.property()
            self._expect_op(")", self.tokens[self.i - 1])
            assert prop.present is not None
            return _Node(prop.present, tok.pos, True, False)
        if tok.kind == "op" and tok.text == "(":
            self._next()
            self._nest(tok)
            inner = self._operand(self.or_expr, tok)
            if not self._is("op", ")"):
                raise self.fail("')' or an operator")
            self._next()
            self.depth -= 1
            return _Node(inner.fn, tok.pos, inner.is_condition, inner.is_value, inner.const)
        if tok.kind in ("ident", "name"):
            return self.property()
        if tok.kind == "param":
            self._next()
            key = str(tok.value).casefold()
            if key not in self.parameters:
                given = ", ".join(f"@{k}" for k in self.parameters) or "none"
                raise SqlFilterError(tok.pos, f"the parameter {tok.text} has no value (parameters given: {given})")
            value = self.parameters[key]
            return _Node(ev.constant(value), tok.pos, isinstance(value, bool), True, value)
        raise self.fail("a value or a condition")

    def property(self) -> _Node:
        first = self._next()
        if not self._is("op", "."):
            return self._user(first.value, first.pos)
        dot = self._next()
        scope = str(first.value).lower()
        if scope not in ("sys", "user"):
            raise SqlFilterError(first.pos, f"expected sys or user before '.', found {first.text!r}")
        tok = self.tok
        if tok.kind not in ("ident", "name", "keyword"):
            raise self.fail("a property name", dot)
        self._next()
        name = str(tok.value)
        if scope == "user":
            return self._user(name, first.pos)
        getter = ev.system_property(name)
        if getter is None:
            if name.lower() in ev.UNAVAILABLE_SYSTEM_PROPERTIES:
                raise SqlFilterError(tok.pos, f"sys.{name} is not available to filters in this broker")
            raise SqlFilterError(tok.pos, f"sys.{name} is not a Service Bus system property")
        present = ev.is_null(getter, True)
        return _Node(getter, first.pos, False, True, property=f"sys.{name}", present=present, system=True)

    def action(self) -> list[ActionStep]:
        steps: list[ActionStep] = []
        while not self._is("end") or not steps:
            verb = self.tok
            if verb.kind != "ident" or verb.text.upper() not in ("SET", "REMOVE"):
                raise self.fail("SET or REMOVE")
            if len(steps) == MAX_ACTION_STATEMENTS:
                raise SqlFilterError(verb.pos, f"an action has at most {MAX_ACTION_STATEMENTS} statements")
            self._next()
            if not self._is("ident") and not self._is("name"):
                raise self.fail("a property name", verb)
            prop = self.property()
            assert prop.property is not None
            target = prop.property
            if prop.system:
                field = ev.PROPERTIES_FIELDS.get(prop.property[4:].lower())
                if field is None:
                    raise SqlFilterError(prop.pos, f"{prop.property} cannot be changed by a rule action")
                target = field
            value = None
            if verb.text.upper() == "SET":
                eq = self._expect_op("=", self.tokens[self.i - 1])
                value = self._value(self._primary_operand(self.additive, eq), " after '='")
            steps.append((target, prop.system, value))
            if self._is("op", ";"):
                self._next()
        return steps

    @staticmethod
    def _user(name: str, pos: int) -> _Node:
        return _Node(ev.user_property(name), pos, False, True, property=name, present=ev.user_present(name))


def parse_action(text: str, parameters: Mapping[str, Any] | None = None) -> list[ActionStep]:
    """The statements of a SQL rule action: ``SET <property> = <expression>`` or ``REMOVE <property>``,
    each optionally followed by ``;`` (SQL action syntax; "Semicolon is optional"); ``@name``
    stands for ``parameters[name]``."""
    return _Parser(text, parameters).action()


def parse(text: str, parameters: Mapping[str, Any] | None = None) -> Callable[[Any], Any]:
    """The predicate closure for ``text`` (returns True, False or None for unknown); its LIKE
    operators share one step budget per evaluation (over it, the condition is unknown).
    ``@name`` stands for ``parameters[name]`` (a constant: fixed with the rule)."""
    parser = _Parser(text, parameters)
    predicate = parser.parse()
    return predicate if parser.budget is None else bounded(predicate, parser.budget, text)
