"""Docstrings and comments cite only names the code has: every Sphinx-style reference
(``:class:``, ``:func:``, ``:meth:``, ``:attr:``, ``:data:``, ``:mod:``, ``:exc:``) in
amqplink's sources names something defined in the package (its last dotted part, as a
class, function, attribute, variable, parameter or module), so a rename that leaves a
comment behind fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests import sources as parsed

PACKAGE = Path(__file__).resolve().parent.parent / "amqplink"
ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc):`~?([\w.]+)`")


def _defined(trees: dict[Path, ast.AST]) -> set[str]:
    names: set[str] = set()
    for path, tree in trees.items():
        names.update(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.update((node.asname or node.name).split("."))
    return names


def test_every_reference_in_the_sources_names_something_defined() -> None:
    sources = {path: path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}
    defined = _defined({path: parsed.tree(path) for path in sources})
    missing = sorted(
        f"{path.relative_to(PACKAGE.parent)}:{number}: {target}"
        for path, text in sources.items()
        for number, line in enumerate(text.splitlines(), 1)
        for target in ROLE.findall(line)
        if target.split(".")[-1] not in defined
    )
    assert len(defined) > 1000  # the walk read the package
    assert missing == []


ROOT = PACKAGE.parent
CITED_PATH = re.compile(r"`((?:amqplink|tests|interop|specs|scripts)/[\w/.-]+\.py)")
PACKAGE_PATH = re.compile(r"`((?:[a-z_]+/)+[\w.-]+\.py)`")


def test_every_source_file_the_docs_name_exists() -> None:
    """A module moved or renamed leaves no doc behind: every ``amqplink/...py`` (and tests,
    interop, specs, scripts) path in the README and docs/ names a file of the repository, and
    so does every path docs/architecture.md gives inside the package (``broker/...``)."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = [f"{doc.name}: {path}" for doc in docs for path in CITED_PATH.findall(doc.read_text())
               if not (ROOT / path).is_file()]  # fmt: skip
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    full = ("amqplink", "tests", "interop", "specs", "scripts")
    inside = [path for path in PACKAGE_PATH.findall(architecture) if path.split("/")[0] not in full]
    missing += [f"architecture.md: {path}" for path in inside if not (PACKAGE / path).is_file()]
    assert len(inside) > 20  # the table paths were read
    assert missing == []
