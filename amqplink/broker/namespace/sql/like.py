"""``[NOT] LIKE``: "%: Any string of zero or more characters. _: Any single character";
"``<escape_char>`` must be an expression that is evaluated as a string of length 1"; "If
any operand is evaluated as unknown, then the result is unknown" (a non-string operand
is unknown here too).

Matching is bounded, because a message can supply both the text and the pattern
(``user.s LIKE user.p``). The pattern is split at ``%`` into segments of fixed length
(``_`` is any one character). The first segment must match at the start, the last at
the end, and each middle segment is found leftmost after the previous one; this
greedy choice is enough, since what follows a ``%`` may start anywhere later. A
segment without ``_`` is found by one ``str.find`` (linear in CPython 3.10+, two-way
algorithm) that starts where the previous segment ended, so such patterns examine at
most ``2 * (len(text) + len(pattern))`` characters. A segment with ``_`` is found by
searching for its longest literal piece and checking the other pieces around each
hit; that check can repeat at many hits (finding a pattern with any-character
positions is not linear in general), so every evaluation of a rule counts its steps
in a :class:`LikeBudget`: each LIKE adds its linear allowance and may spend
:data:`LIKE_STEP_BUDGET` steps beyond it. A rule that goes over is unknown, as a
filter evaluation error is for this broker (the rule does not match), and the event
loop is never held for longer than that budget.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

from amqplink import AMQPLinkError
from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.sql.evaluate import Pred, Value

__all__ = [
    "LIKE_ALLOWANCE_PER_CHAR",
    "LIKE_PIECE_STEPS",
    "LIKE_STEP_BUDGET",
    "LikeBudget",
    "LikeBudgetExceeded",
    "LikePattern",
    "bounded",
    "like",
    "like_matcher",
]

log = logging.getLogger(__name__)

LIKE_STEP_BUDGET = 1_000_000
"""Steps one evaluation of a rule may spend in its LIKE operators beyond their linear
allowance (a character examined is one step; about a millisecond of C-level work)."""
LIKE_ALLOWANCE_PER_CHAR = 2
"""Steps each LIKE evaluation adds to the budget per character of its text and pattern."""
LIKE_PIECE_STEPS = 256
"""Steps charged for each literal piece handled in Python (parsing a pattern, checking a
piece at a candidate position): a few hundred nanoseconds, where a character compared in
C is about one; so the budget stops an evaluation after about 4,000 such pieces."""


class LikeBudgetExceeded(AMQPLinkError):
    """A rule evaluation went over its :class:`LikeBudget`; the condition is unknown."""


class LikeBudget:
    """The steps one rule evaluation may still spend in LIKE (reset by :func:`bounded`).

    One budget belongs to one compiled filter and is used by one evaluation at a time
    (the broker evaluates filters on its event loop)."""

    __slots__ = ("left", "limit", "spent", "warned")

    def __init__(self, limit: int = LIKE_STEP_BUDGET) -> None:
        self.limit = limit
        self.left = limit
        self.spent = 0
        """Steps spent since the last :meth:`reset`."""
        self.warned = False

    def reset(self) -> None:
        """Start a new evaluation: the whole limit left, nothing spent."""
        self.left = self.limit
        self.spent = 0

    def grant(self, steps: int) -> None:
        """Add steps a LIKE may spend (an allowance per character of the value and the pattern)."""
        self.left += steps

    def charge(self, steps: int) -> None:
        """Spend ``steps``; :class:`LikeBudgetExceeded` (the condition is unknown) once past the budget."""
        self.spent += steps
        self.left -= steps
        if self.left < 0:
            raise LikeBudgetExceeded(f"LIKE went over its budget after {self.spent} steps")


_UNBOUNDED_STEPS = 1 << 62


def _unbounded() -> LikeBudget:
    return LikeBudget(_UNBOUNDED_STEPS)


@dataclass(frozen=True, slots=True)
class _Segment:
    """A run of the pattern between two ``%``: ``length`` characters, of which the
    ``pieces`` (offset, literal) are fixed and the rest are ``_``."""

    length: int
    pieces: tuple[tuple[int, str], ...]
    anchor: int
    """Index in ``pieces`` of the longest one (searched for first); -1 when there is none."""

    @classmethod
    def of(cls, items: list[str | int]) -> _Segment:
        pieces: list[tuple[int, str]] = []
        at = 0
        for item in items:
            if isinstance(item, int):
                at += item
            elif pieces and pieces[-1][0] + len(pieces[-1][1]) == at:
                pieces[-1] = (pieces[-1][0], pieces[-1][1] + item)
                at += len(item)
            else:
                pieces.append((at, item))
                at += len(item)
        anchor = max(range(len(pieces)), key=lambda i: len(pieces[i][1]), default=-1)
        return cls(at, tuple(pieces), anchor)

    def at(self, text: str, start: int, budget: LikeBudget, skip: int = -1) -> bool:
        """Whether the segment matches ``text`` at ``start`` (which leaves room for it)."""
        steps = 0
        left = budget.left
        try:
            for i, (offset, literal) in enumerate(self.pieces):
                if i == skip:
                    continue
                steps += len(literal) + LIKE_PIECE_STEPS
                if steps > left:  # stop here: the charge below raises
                    return False
                if not text.startswith(literal, start + offset):
                    return False
            return True
        finally:
            budget.charge(steps)

    def find(self, text: str, lo: int, hi: int, budget: LikeBudget) -> int:
        """The leftmost start ``s >= lo`` with the segment matching inside ``text[s:hi]``; -1 if none."""
        if lo + self.length > hi:
            return -1
        if self.anchor < 0:
            return lo
        offset, literal = self.pieces[self.anchor]
        last = hi - self.length + offset + len(literal)  # the anchor ends by here
        from_ = lo + offset
        while True:
            found = text.find(literal, from_, last)
            budget.charge((last - from_ if found < 0 else found - from_) + len(literal))
            if found < 0:
                return -1
            start = found - offset
            if len(self.pieces) == 1 or self.at(text, start, budget, skip=self.anchor):
                return start
            from_ = found + 1


def _parse(pattern: str, escape: str | None) -> list[list[str | int]]:
    """The pattern's segments between unescaped ``%``: literals and counts of ``_``."""
    segments: list[list[str | int]] = [[]]

    def plain(chunk: str) -> None:
        for k, part in enumerate(chunk.split("%")):
            if k:
                segments.append([])
            for q, piece in enumerate(part.split("_")):
                if q:
                    segments[-1].append(1)
                if piece:
                    segments[-1].append(piece)

    if escape is None:
        plain(pattern)
        return segments
    i = 0
    while True:
        j = pattern.find(escape, i)
        if j < 0:
            plain(pattern[i:])
            return segments
        if j + 1 >= len(pattern):
            raise ValueError(f"the pattern ends with the escape character {escape!r}")
        plain(pattern[i:j])
        segments[-1].append(pattern[j + 1])
        i = j + 2


class LikePattern:
    """A compiled LIKE pattern; ValueError for an escape character at the pattern's end."""

    __slots__ = ("segments",)

    def __init__(self, pattern: str, escape: str | None = None) -> None:
        self.segments = [_Segment.of(items) for items in _parse(pattern, escape)]

    def matches(self, text: str, budget: LikeBudget | None = None) -> bool:
        """Whether ``text`` matches; charges ``budget`` (:class:`LikeBudgetExceeded` when spent)."""
        budget = budget if budget is not None else _unbounded()
        segments, n = self.segments, len(text)
        if len(segments) == 1:
            only = segments[0]
            return only.length == n and only.at(text, 0, budget)
        head, tail = segments[0], segments[-1]
        end = n - tail.length
        if head.length > end or not head.at(text, 0, budget) or not tail.at(text, end, budget):
            return False
        pos = head.length
        for segment in segments[1:-1]:
            found = segment.find(text, pos, end, budget)
            if found < 0:
                return False
            pos = found + segment.length
        return True


def like_matcher(pattern: str, escape: str | None) -> LikePattern:
    """The compiled pattern ("%: Any string of zero or more characters. _: Any single
    character"); ValueError for an escape character at the pattern's end."""
    return LikePattern(pattern, escape)


@functools.lru_cache(maxsize=256)
def _cached_matcher(pattern: str, escape: str | None) -> LikePattern | None:
    try:
        return LikePattern(pattern, escape)
    except ValueError:
        return None


def _parse_steps(pattern: str, escape: str | None) -> int:
    """An upper bound on the Python-level work of compiling ``pattern`` (counted in C)."""
    pieces = pattern.count("%") + pattern.count("_") + (0 if escape is None else pattern.count(escape)) + 1
    return len(pattern) + LIKE_PIECE_STEPS * pieces


def like(
    value: Value,
    pattern: Value,
    escape: Value | None,
    negated: bool,
    fixed: LikePattern | None = None,
    budget: LikeBudget | None = None,
) -> Pred:
    """``value [NOT] LIKE pattern [ESCAPE escape]``; a non-string operand is unknown.

    ``fixed`` is the pattern compiled ahead when the pattern and escape are constants;
    ``budget`` is the rule's (:func:`bounded` resets it for each evaluation).
    """
    steps = budget if budget is not None else _unbounded()
    if fixed is not None:
        compiled = fixed
        fixed_len = sum(s.length for s in fixed.segments) + len(fixed.segments)

        def run_fixed(env: Envelope) -> bool | None:
            v = value(env)
            if not isinstance(v, str):
                return None
            steps.grant(LIKE_ALLOWANCE_PER_CHAR * (len(v) + fixed_len))
            return compiled.matches(v, steps) is not negated

        return run_fixed

    def run(env: Envelope) -> bool | None:
        v = value(env)
        p = pattern(env)
        e = None if escape is None else escape(env)
        if not isinstance(v, str) or not isinstance(p, str):
            return None
        if escape is not None and (not isinstance(e, str) or len(e) != 1):
            return None
        steps.grant(LIKE_ALLOWANCE_PER_CHAR * (len(v) + len(p)))
        steps.charge(_parse_steps(p, e))
        matcher = _cached_matcher(p, e)
        if matcher is None:
            return None
        return matcher.matches(v, steps) is not negated

    return run


def bounded(predicate: Pred, budget: LikeBudget, expression: str) -> Pred:
    """``predicate`` with ``budget`` reset for each evaluation; over budget, the condition is
    unknown (the rule does not match), logged once per filter at WARNING (then DEBUG)."""

    def run(env: Envelope) -> bool | None:
        budget.reset()
        try:
            return predicate(env)
        except LikeBudgetExceeded as exc:
            level = logging.DEBUG if budget.warned else logging.WARNING
            budget.warned = True
            log.log(level, "SQL filter %.100r is unknown for a message: %s", expression, exc)
            return None

    return run
