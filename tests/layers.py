"""The import graph between amqplink's layers, read from the source (no import runs).

A layer is a top-level module or subpackage of ``amqplink`` (``codec``, ``engine``,
``message``, ``cli``, ...). Imports inside ``if TYPE_CHECKING:`` blocks are left out:
they are for the type checker only. Imports inside functions count (they run).
``python3 -m tests.layers`` prints the graph as docs/architecture.md tabulates it.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator
from pathlib import Path

from tests import sources

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "amqplink"


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "amqplink" and len(parts) > 1 else None


def runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
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
    return tuple(node for node in runtime_nodes(sources.tree(path)) if isinstance(node, ast.Import | ast.ImportFrom))


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


def module_name(path: Path) -> str:
    """``amqplink/servicebus/paired/__init__.py`` -> ``amqplink.servicebus.paired``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path, modules: frozenset[str]) -> Iterator[str]:
    """The modules of ``modules`` a source file imports at run time (:func:`imports_in`)."""
    yield from imports_in(_runtime_imports(path), path.relative_to(ROOT).with_suffix("").parts[:-1], modules)


def imports_in(nodes: Iterable[ast.AST], package: tuple[str, ...], modules: frozenset[str]) -> Iterator[str]:
    """The modules of ``modules`` the import statements among ``nodes`` import, for a module
    in ``package``: ``from package import name`` is an import of ``package.name`` when that
    is a module, else of ``package`` (the ``__init__`` that defines the name). The parent
    packages Python also runs on an import are left out (every ``__init__`` that imports its
    own modules would be a cycle)."""
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in modules)
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = list(package[: len(package) - node.level + 1])
            source = ".".join([*base, node.module] if node.module else base)
        else:
            source = node.module or ""
        for alias in node.names:
            sub = f"{source}.{alias.name}"
            if sub in modules:
                yield sub
            elif source in modules:
                yield source


def module_graph(under: str = "amqplink") -> dict[str, set[str]]:
    """Module -> the modules it imports at run time, for the modules in package ``under``."""
    paths = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    modules = frozenset(paths)
    inside = {name for name in modules if name == under or name.startswith(under + ".")}
    return {
        name: {target for target in module_imports(paths[name], modules) if target in inside and target != name}
        for name in sorted(inside)
    }


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


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
    import sys

    if sys.argv[1:2] == ["--cycles"]:
        for package in sys.argv[2:] or ["amqplink"]:
            for component in import_cycles(module_graph(package)):
                print(f"{len(component)} modules: {', '.join(component)}")
        sys.exit()
    for layer, targets in sorted(import_graph().items()):
        print(f"| `{layer}` | {', '.join(f'`{t}`' for t in sorted(targets)) or '(none)'} |")
