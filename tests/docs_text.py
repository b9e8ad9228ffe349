"""The README's and the docs' own text, for tests that run or compare it (so it cannot drift):
a section's fenced code blocks, found by heading."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def section(heading: str, page: Path = README) -> str:
    """The text under the heading ``heading`` (any level), up to the next heading of that level or above."""
    text = page.read_text()
    match = re.search(rf"^(#+) {re.escape(heading)}\n", text, re.M)
    assert match is not None, f"no heading {heading!r} in {page.name}"
    level = len(match.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, match.end())
    return text[match.end() : end.start() if end else len(text)]


def code_blocks(heading: str, language: str, page: Path = README) -> list[str]:
    """The fenced ``language`` blocks of a section, dedented (a list item's blocks are indented)."""
    blocks = []
    for indent, body in re.findall(rf"^( *)```{language}\n(.*?)^\1```", section(heading, page), re.M | re.S):
        blocks.append("\n".join(line[len(indent) :] for line in body.splitlines()) + "\n")
    return blocks
