"""Documentation lives in the repository: every doc the code, tests, interop harnesses,
specs and README cite is a file in ``docs/`` (and every ``#section`` a heading in it);
nothing points outside the repository (``../shared``, the old PROTOCOL.md,
ARCHITECTURE.md and PEERS.md notes)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
HERE = Path(__file__).resolve()
CITING = [ROOT / "amqplink", ROOT / "tests", ROOT / "interop", ROOT / "specs", ROOT / "README.md"]
SUFFIXES = {".py", ".md", ".json", ".txt", ".toml", ".cfg", ".ini", ".sh", ""}

OUTSIDE = re.compile(r"\.\./shared|/work/shared|\b(?:PROTOCOL|ARCHITECTURE|PEERS)\.md")
CITATION = re.compile(r"docs/([A-Za-z0-9_.-]+\.md)(?:#([A-Za-z0-9_-]+))?")


def _files() -> Iterator[Path]:
    for place in CITING:
        paths = [place] if place.is_file() else sorted(place.rglob("*"))
        for path in paths:
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts and path != HERE:
                yield path


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", page.read_text(), re.M)}


def test_slug_matches_githubs_rules() -> None:
    assert slug("`$management` operations") == "management-operations"
    assert slug("RabbitMQ 3.10 with `rabbitmq_amqp1_0`") == "rabbitmq-310-with-rabbitmq_amqp1_0"
    assert slug("Claims-based security (CBS)") == "claims-based-security-cbs"


def test_nothing_cites_documents_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _files()
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == [], "cite docs/<page>.md inside the repository instead:\n" + "\n".join(found)


def test_every_cited_doc_and_section_exists() -> None:
    cited = 0
    missing = []
    for path in _files():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for match in CITATION.finditer(line):
                cited += 1
                page, section = DOCS / match.group(1), match.group(2)
                where = f"{path.relative_to(ROOT)}:{n}: {match.group(0)}"
                if not page.is_file():
                    missing.append(f"{where} (no such page)")
                elif section is not None and section not in anchors(page):
                    missing.append(f"{where} (no such section; {page.name} has {sorted(anchors(page))})")
    assert cited >= 30, f"only {cited} citations found: is the pattern still right?"
    assert missing == [], "\n".join(missing)


@pytest.mark.parametrize("page", ["architecture.md", "protocol.md", "peers.md", "README.md"])
def test_links_between_docs_resolve(page: str) -> None:
    """Relative links inside the three core pages and the index point at files (or
    sections) that exist; the index may list other topics' pages still to come."""
    text = (DOCS / page).read_text()
    broken = []
    for target, section in re.findall(r"\]\(([^)#]*)(?:#([^)]+))?\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path = (DOCS / target) if target else DOCS / page
        if page == "README.md" and not path.exists() and path.parent == DOCS:
            continue  # another helper's topic page, listed ahead of its merge
        if not path.exists():
            broken.append(target)
        elif section and path.suffix == ".md" and section not in anchors(path):
            broken.append(f"{target}#{section}")
    assert broken == []
