"""The import graph between amqplink's layers, read from the source (no import runs).

A layer is a top-level module or subpackage of ``amqplink`` (``codec``, ``engine``,
``message``, ``cli``, ...). Imports inside ``if TYPE_CHECKING:`` blocks are left out:
they are for the type checker only. Imports inside functions count (they run).
``python3 -m tests.layers`` prints the graph as docs/architecture.md tabulates it.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

from tests import sources

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "amqplink"


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "amqplink" and len(parts) > 1 else None


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except the bodies of ``if TYPE_CHECKING:`` blocks."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


@functools.cache
def _runtime_imports(path: Path) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """The import statements of a source file that run (read once per test process: the
    layer tests each walk the whole package)."""
    return tuple(node for node in _runtime_nodes(sources.tree(path)) if isinstance(node, ast.Import | ast.ImportFrom))


def imported(path: Path) -> Iterator[str]:
    """The modules a source file imports at run time (relative imports made absolute)."""
    rel = path.relative_to(ROOT).with_suffix("").parts
    package = rel[:-1]  # what a relative import of level 1 starts from, for a module or an __init__
    for node in _runtime_imports(path):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
                yield ".".join([*base, node.module] if node.module else base)
            elif node.module:
                yield node.module


def import_graph() -> dict[str, set[str]]:
    """Layer -> the other layers its modules import at run time."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("").parts
        source = _layer(".".join(rel))
        if source is None or source == "__init__":
            continue  # amqplink/__init__.py: lazy names only
        targets = graph.setdefault(source, set())
        for module in imported(path):
            target = _layer(module)
            if target is not None and target != source:
                targets.add(target)
    return graph


if __name__ == "__main__":
    for layer, targets in sorted(import_graph().items()):
        print(f"| `{layer}` | {', '.join(f'`{t}`' for t in sorted(targets)) or '(none)'} |")
