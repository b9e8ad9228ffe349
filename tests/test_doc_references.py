"""Docstrings and comments cite only names the code has: every Sphinx-style reference
(``:class:``, ``:func:``, ``:meth:``, ``:attr:``, ``:data:``, ``:mod:``, ``:exc:``) in
amqplink's sources names something defined in the package (its last dotted part, as a
class, function, attribute, variable, parameter or module), so a rename that leaves a
comment behind fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

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
    defined = _defined({path: ast.parse(text) for path, text in sources.items()})
    missing = sorted(
        f"{path.relative_to(PACKAGE.parent)}:{number}: {target}"
        for path, text in sources.items()
        for number, line in enumerate(text.splitlines(), 1)
        for target in ROLE.findall(line)
        if target.split(".")[-1] not in defined
    )
    assert len(defined) > 1000  # the walk read the package
    assert missing == []
