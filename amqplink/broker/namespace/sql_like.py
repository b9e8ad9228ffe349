"""``[NOT] LIKE``: "%: Any string of zero or more characters. _: Any single character";
"``<escape_char>`` must be an expression that is evaluated as a string of length 1"; "If
any operand is evaluated as unknown, then the result is unknown" (a non-string operand
is unknown here too).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.sql_eval import Pred, Value

__all__ = ["like", "like_matcher"]


def like_matcher(pattern: str, escape: str | None) -> Callable[[str], bool]:
    """A matcher for a LIKE pattern ("%: Any string of zero or more characters. _: Any
    single character"); ValueError for an escape character at the pattern's end.

    The pattern is split at ``%`` into fixed-length segments matched leftmost in turn,
    so matching is linear in the text for a given pattern (no regex backtracking).
    """
    segments: list[tuple[re.Pattern[str], int]] = []
    current: list[str] = []
    i = 0
    while i <= len(pattern):
        c = pattern[i] if i < len(pattern) else "%"
        if escape is not None and c == escape and i < len(pattern):
            if i + 1 >= len(pattern):
                raise ValueError(f"the pattern ends with the escape character {escape!r}")
            current.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if c == "%":
            segments.append((re.compile("".join(current), re.DOTALL), len(current)))
            current = []
        else:
            current.append("." if c == "_" else re.escape(c))
        i += 1
    if len(segments) == 1:
        only = segments[0][0]
        return lambda s: only.fullmatch(s) is not None
    (head, head_len), middle, (tail, tail_len) = segments[0], segments[1:-1], segments[-1]
    middle = [(rx, n) for rx, n in middle if n]

    def match(s: str) -> bool:
        if head.match(s) is None:
            return False
        pos = head_len
        for rx, _ in middle:
            found = rx.search(s, pos)
            if found is None:
                return False
            pos = found.end()
        start = len(s) - tail_len
        return start >= pos and tail.fullmatch(s, start) is not None

    return match


@functools.lru_cache(maxsize=256)
def _cached_matcher(pattern: str, escape: str | None) -> Callable[[str], bool] | None:
    try:
        return like_matcher(pattern, escape)
    except ValueError:
        return None


def like(
    value: Value, pattern: Value, escape: Value | None, negated: bool, fixed: Callable[[str], bool] | None = None
) -> Pred:
    """``value [NOT] LIKE pattern [ESCAPE escape]``; a non-string operand is unknown.

    ``fixed`` is the matcher compiled ahead when the pattern and escape are constants.
    """
    if fixed is not None:
        matches = fixed

        def run_fixed(env: Envelope) -> bool | None:
            v = value(env)
            return None if not isinstance(v, str) else matches(v) is not negated

        return run_fixed

    def run(env: Envelope) -> bool | None:
        v = value(env)
        p = pattern(env)
        e = None if escape is None else escape(env)
        if not isinstance(v, str) or not isinstance(p, str):
            return None
        if escape is not None and (not isinstance(e, str) or len(e) != 1):
            return None
        matcher = _cached_matcher(p, e)
        if matcher is None:
            return None
        return matcher(v) is not negated

    return run
