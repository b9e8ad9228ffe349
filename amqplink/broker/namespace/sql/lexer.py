"""Tokens of a Service Bus SQL filter expression, each with its 1-based position.

From the SQL filter syntax reference: a ``<regular_identifier>`` is
``[[:IsLetter:]][_[:IsLetter:][:IsDigit:]]*`` and "can't be a reserved keyword";
"``<delimited_identifier>`` is any string that is enclosed with left/right square
brackets ([]). A right square bracket is represented as two right square
brackets"; a ``<quoted_identifier>`` is enclosed in double quotation marks (``""``
inside); "A single quotation mark embedded in a string constant is represented as
two single quotation marks"; integer constants are ``System.Int64``, decimal and
scientific constants ``System.Double``. Keywords are case-insensitive. A parameter is
``@`` and a name (``<parameter>``: "@<parameter_name>"), its value given with the rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from amqplink import AMQPLinkError

__all__ = ["KEYWORDS", "MAX_SQL_LENGTH", "SqlFilterError", "Token", "tokenize"]

MAX_SQL_LENGTH = 1024
"""Characters; Service Bus quotas: "Maximum length of filter condition string: 1024 characters"."""

KEYWORDS = frozenset(("AND", "OR", "NOT", "IN", "LIKE", "ESCAPE", "IS", "NULL", "EXISTS", "TRUE", "FALSE"))
_INT64 = (-(2**63), 2**63 - 1)
_OPERATORS = ("<>", "!=", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", ".", ";")


class SqlFilterError(AMQPLinkError, ValueError):
    """A SQL filter expression that cannot be compiled; ``position`` is the 1-based column."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(f"position {position}: {message}")
        self.position = position
        self.reason = message


@dataclass(frozen=True, slots=True)
class Token:
    """``kind``: ``ident`` (regular), ``name`` (delimited or quoted), ``keyword`` (upper-cased
    ``text``), ``string``, ``number``, ``param`` (``@name``: ``value`` is the name), ``op``
    or ``end``."""

    kind: str
    text: str
    value: Any
    pos: int

    def describe(self) -> str:
        """How an error message names this token: ``end of expression``, ``a string`` or the token's text."""
        if self.kind == "end":
            return "end of expression"
        if self.kind == "string":
            return "a string"
        return repr(self.text)


def _digit(c: str) -> bool:
    return c.isascii() and c.isdigit()


def _closed(text: str, start: int, close: str, what: str) -> tuple[str, int]:
    """The content of a ``close``-delimited token starting at ``start`` (doubled ``close`` escapes)."""
    out: list[str] = []
    i = start + 1
    n = len(text)
    while True:
        j = text.find(close, i)
        if j < 0:
            raise SqlFilterError(start + 1, f"unterminated {what}")
        out.append(text[i:j])
        if j + 1 < n and text[j + 1] == close:
            out.append(close)
            i = j + 2
            continue
        return "".join(out), j + 1


def _number(text: str, i: int) -> tuple[Token, int]:
    n = len(text)
    j = i
    while j < n and _digit(text[j]):
        j += 1
    is_float = False
    if j < n and text[j] == ".":
        is_float = True
        j += 1
        while j < n and _digit(text[j]):
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and _digit(text[k]):
            is_float = True
            j = k
            while j < n and _digit(text[j]):
                j += 1
    if j < n and (text[j].isalpha() or text[j] == "_"):
        raise SqlFilterError(j + 1, f"unexpected {text[j]!r} after a number")
    raw = text[i:j]
    if raw == ".":
        raise SqlFilterError(i + 1, "unexpected '.'")
    value: int | float
    if is_float:
        value = float(raw)
        if not math.isfinite(value):
            raise SqlFilterError(i + 1, f"{raw} is out of range for a double")
    else:
        value = int(raw)
        if not _INT64[0] <= value <= _INT64[1]:
            raise SqlFilterError(i + 1, f"{raw} is out of range for a 64-bit integer")
    return Token("number", raw, value, i + 1), j


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an ``end`` token; :class:`SqlFilterError` otherwise."""
    if len(text) > MAX_SQL_LENGTH:
        raise SqlFilterError(MAX_SQL_LENGTH + 1, f"the expression is longer than {MAX_SQL_LENGTH} characters")
    tokens: list[Token] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c == "'":
            value, j = _closed(text, i, "'", "string (a quote inside a string is written '')")
            tokens.append(Token("string", text[i:j], value, i + 1))
            i = j
        elif c in '["':
            value, j = _closed(text, i, "]" if c == "[" else '"', "delimited name")
            if not value:
                raise SqlFilterError(i + 1, "a delimited name cannot be empty")
            tokens.append(Token("name", text[i:j], value, i + 1))
            i = j
        elif _digit(c) or (c == "." and i + 1 < n and _digit(text[i + 1])):
            token, i = _number(text, i)
            tokens.append(token)
        elif c == "@":
            j = i + 1
            while j < n and (text[j].isalpha() or text[j].isdecimal() or text[j] == "_"):
                j += 1
            if j == i + 1 or not text[i + 1].isalpha():
                raise SqlFilterError(i + 1, "a parameter is '@' and a name (@name)")
            tokens.append(Token("param", text[i:j], text[i + 1 : j], i + 1))
            i = j
        elif c.isalpha():
            j = i + 1
            while j < n and (text[j].isalpha() or text[j].isdecimal() or text[j] == "_"):
                j += 1
            word = text[i:j]
            upper = word.upper()
            if upper in KEYWORDS:
                tokens.append(Token("keyword", upper, word, i + 1))
            else:
                tokens.append(Token("ident", word, word, i + 1))
            i = j
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            if op is None:
                raise SqlFilterError(i + 1, f"unexpected character {c!r}")
            tokens.append(Token("op", op, op, i + 1))
            i += len(op)
    tokens.append(Token("end", "", None, n + 1))
    return tokens
