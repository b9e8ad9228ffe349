"""amqplink's ``type: ignore`` comments stay few and explained (issue 35, item 3).

Each one hides what mypy would check: at most :data:`LIMIT` in the package, each with
its error code and, after it on the same line, a comment saying why the code is right
(``# type: ignore[code]  # why``). Events are narrowed by ``type(event) is C`` per
branch, link tables keyed by ``Link``: a new ignore is the last resort, not the first.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator

import pytest

from tests.layers import PACKAGE

LIMIT = 25
"""The most ``type: ignore`` comments amqplink may hold."""

_IGNORE = re.compile(r"#\s*type:\s*ignore\b")
_EXPLAINED = re.compile(r"#\s*type:\s*ignore\[[a-z0-9-]+(,\s*[a-z0-9-]+)*\]\s+#\s*\S")


def ignores(source: str) -> Iterator[tuple[int, str]]:
    """``(line, comment)`` of each comment in ``source`` that holds a ``type: ignore`` (real
    comments only, through :mod:`tokenize`: not the words in a string or docstring)."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and _IGNORE.search(token.string):
            yield token.start[0], token.string


def unexplained(comment: str) -> bool:
    """Whether ``comment`` lacks an error code or a reason after the ignore."""
    return _EXPLAINED.search(comment) is None


def package_ignores() -> list[tuple[str, int, str]]:
    """Each ``type: ignore`` of the package: ``(path, line, comment)``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, comment in ignores(path.read_text()):
            found.append((str(path.relative_to(PACKAGE.parent)), line, comment))
    return found


def test_few_type_ignores() -> None:
    found = package_ignores()
    assert found, "no type: ignore found at all: is the package path right?"
    listing = "\n".join(f"{path}:{line}: {comment}" for path, line, comment in found)
    assert len(found) <= LIMIT, f"{len(found)} type: ignore in amqplink (at most {LIMIT}):\n{listing}"


def test_each_type_ignore_says_why() -> None:
    bare = [f"{path}:{line}: {comment}" for path, line, comment in package_ignores() if unexplained(comment)]
    assert not bare, "each type: ignore needs its code and a reason: `# type: ignore[code]  # why`:\n" + "\n".join(bare)


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        ("x = f()  # type: ignore[arg-type]  # a str too: made a mode later\n", False),
        ("x = f()  # type: ignore[arg-type, misc]  # both: see above\n", False),
        ("x = f()  # type: ignore[arg-type]\n", True),
        ("x = f()  # type: ignore\n", True),
        ("x = f()  # type: ignore  # no code\n", True),
        ("x = f()  # type: ignore[arg-type]  #\n", True),
        ("x = f()  # type:ignore[misc]\n", True),
    ],
)
def test_the_check_tells_an_explained_ignore(line: str, bad: bool) -> None:
    [(number, comment)] = list(ignores(line))
    assert number == 1
    assert unexplained(comment) is bad


def test_the_check_reads_comments_only() -> None:
    source = 's = "# type: ignore"\n"""# type: ignore[misc] in a docstring"""\ny = 1  # type: ignore[misc]  # why\n'
    assert [line for line, _ in ignores(source)] == [3]
