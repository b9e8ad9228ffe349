"""A subset of Service Bus's SQL filter language, compiled to a predicate over a message.

Supported: comparisons (``=``, ``<>``, ``!=``, ``<``, ``<=``, ``>``, ``>=``) between
properties and literals, ``IS [NOT] NULL``, ``[NOT] LIKE 'pattern'`` (``%`` and
``_``), ``[NOT] IN (...)``, ``EXISTS(prop)``, ``AND``/``OR``/``NOT`` and parentheses;
literals are strings (``'it''s'``), numbers, ``TRUE``, ``FALSE``, ``NULL``.
Properties are application properties (``color``, ``user.color``, ``[odd name]``)
or system properties (``sys.MessageId``, ``sys.CorrelationId``, ``sys.To``,
``sys.ReplyTo``, ``sys.Label``, ``sys.SessionId``, ``sys.ReplyToSessionId``,
``sys.ContentType``). As in SQL, a comparison with a missing property is unknown
and a rule matches only when its expression is true. Arithmetic and functions other
than ``EXISTS`` are refused at load time with :class:`SqlFilterError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MAX_EXPRESSION_LENGTH", "Getter", "SqlFilterError", "compile_sql_filter"]

MAX_EXPRESSION_LENGTH = 1024
"""Characters of one SQL filter expression (Service Bus's limit)."""
MAX_DEPTH = 32
"""Nesting of parentheses and NOTs one expression may use."""

Getter = Callable[[str, bool], tuple[bool, Any]]
"""``get(name, system)`` -> (present, value) for the message being matched."""
Predicate = Callable[[Getter], bool | None]

SYSTEM_PROPERTIES = frozenset(
    ("messageid", "correlationid", "to", "replyto", "label", "subject", "sessionid", "replytosessionid", "contenttype")
)


class SqlFilterError(ValueError):
    """An expression outside the supported subset; the message says where."""


_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op><>|!=|<=|>=|=|<|>)"
    r"|(?P<punct>[(),])|(?P<bracket>\[[^\]]+\])|(?P<word>[A-Za-z_][A-Za-z0-9_.]*))"
)


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise SqlFilterError(f"unexpected character {text[pos : pos + 1]!r} at {pos}")
        kind = m.lastgroup
        raw = m.group(kind or "")
        if kind == "str":
            out.append(("lit", raw[1:-1].replace("''", "'")))
        elif kind == "num":
            out.append(("lit", float(raw) if "." in raw else int(raw)))
        elif kind == "bracket":
            out.append(("name", raw[1:-1]))
        elif kind == "word":
            upper = raw.upper()
            if upper in ("AND", "OR", "NOT", "IS", "NULL", "LIKE", "IN", "EXISTS", "TRUE", "FALSE"):
                out.append(("kw", upper))
            else:
                out.append(("name", raw))
        else:
            out.append((kind or "", raw))
        pos = m.end()
    return out


def _like(pattern: str) -> re.Pattern[str]:
    parts = [".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern]
    return re.compile("".join(parts), re.DOTALL)


def _compare(op: str, left: Any, right: Any) -> bool | None:
    if left is None or right is None:
        return None
    if isinstance(left, bool) != isinstance(right, bool):
        return False if op == "=" else (True if op in ("<>", "!=") else None)
    try:
        if op == "=":
            return bool(left == right)
        if op in ("<>", "!="):
            return bool(left != right)
        if op == "<":
            return bool(left < right)
        if op == "<=":
            return bool(left <= right)
        if op == ">":
            return bool(left > right)
        return bool(left >= right)
    except TypeError:
        return None


def _not(value: bool | None) -> bool | None:
    return None if value is None else not value


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0
        self.depth = 0

    def peek(self) -> tuple[str, Any] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, kind: str, value: Any = None) -> Any:
        token = self.peek()
        if token is None or token[0] != kind or (value is not None and token[1] != value):
            found = "the end" if token is None else repr(token[1])
            raise SqlFilterError(f"expected {value or kind} but found {found}")
        self.pos += 1
        return token[1]

    def accept(self, kind: str, value: Any = None) -> bool:
        token = self.peek()
        if token is not None and token[0] == kind and (value is None or token[1] == value):
            self.pos += 1
            return True
        return False

    def expression(self) -> Predicate:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise SqlFilterError(f"nested deeper than {MAX_DEPTH}")
        left = self.conjunction()
        while self.accept("kw", "OR"):
            right = self.conjunction()
            left = (lambda a, b: lambda g: _or(a(g), b(g)))(left, right)
        self.depth -= 1
        return left

    def conjunction(self) -> Predicate:
        left = self.negation()
        while self.accept("kw", "AND"):
            right = self.negation()
            left = (lambda a, b: lambda g: _and(a(g), b(g)))(left, right)
        return left

    def negation(self) -> Predicate:
        if self.accept("kw", "NOT"):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise SqlFilterError(f"nested deeper than {MAX_DEPTH}")
            inner = self.negation()
            self.depth -= 1
            return lambda g: _not(inner(g))
        return self.predicate()

    def operand(self) -> Callable[[Getter], Any]:
        token = self.peek()
        if token is None:
            raise SqlFilterError("expected a property or a value but found the end")
        if token[0] == "lit":
            self.pos += 1
            value = token[1]
            return lambda g: value
        if token[0] == "kw" and token[1] in ("TRUE", "FALSE", "NULL"):
            self.pos += 1
            constant = {"TRUE": True, "FALSE": False, "NULL": None}[token[1]]
            return lambda g: constant
        name, system = self.name()
        return lambda g: g(name, system)[1]

    def name(self) -> tuple[str, bool]:
        raw = self.take("name")
        lowered = raw.lower()
        if lowered.startswith("sys."):
            prop = lowered[4:]
            if prop not in SYSTEM_PROPERTIES:
                raise SqlFilterError(f"{raw!r} is not a system property this broker filters on")
            return prop, True
        if lowered.startswith("user."):
            return raw[5:], False
        if "." in raw:
            raise SqlFilterError(f"{raw!r}: only sys. and user. prefixes are known")
        return raw, False

    def predicate(self) -> Predicate:
        if self.accept("punct", "("):
            inner = self.expression()
            self.take("punct", ")")
            return inner
        if self.accept("kw", "EXISTS"):
            self.take("punct", "(")
            name, system = self.name()
            self.take("punct", ")")
            return lambda g: g(name, system)[0]
        left = self.operand()
        if self.accept("kw", "IS"):
            negate = self.accept("kw", "NOT")
            self.take("kw", "NULL")
            return lambda g: (left(g) is None) != negate
        negate = self.accept("kw", "NOT")
        if self.accept("kw", "LIKE"):
            pattern = _like(str(self.take("lit")))
            return lambda g: _like_match(pattern, left(g), negate)
        if self.accept("kw", "IN"):
            self.take("punct", "(")
            values = [self.take("lit")]
            while self.accept("punct", ","):
                values.append(self.take("lit"))
            self.take("punct", ")")
            return lambda g: _in(left(g), values, negate)
        if negate:
            raise SqlFilterError("NOT here must be followed by LIKE or IN")
        op = self.take("op")
        right = self.operand()
        return lambda g: _compare(op, left(g), right(g))


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _like_match(pattern: re.Pattern[str], value: Any, negate: bool) -> bool | None:
    if not isinstance(value, str):
        return None
    return (pattern.fullmatch(value) is not None) != negate


def _in(value: Any, values: list[Any], negate: bool) -> bool | None:
    if value is None:
        return None
    return (value in values) != negate


def compile_sql_filter(expression: str) -> Callable[[Getter], bool]:
    """A predicate that is true when ``expression`` is true for a message's properties."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SqlFilterError(f"longer than {MAX_EXPRESSION_LENGTH} characters")
    parser = _Parser(expression)
    predicate = parser.expression()
    if parser.peek() is not None:
        raise SqlFilterError(f"unexpected {parser.peek()[1]!r} after a complete expression")  # type: ignore[index]
    return lambda get: predicate(get) is True


def mapping_getter(system: Mapping[str, Any], application: Mapping[str, Any]) -> Getter:
    """A getter over plain mappings (system names lower case, without ``sys.``)."""

    def get(name: str, is_system: bool) -> tuple[bool, Any]:
        source = system if is_system else application
        if name in source and source[name] is not None:
            return True, source[name]
        return False, None

    return get
