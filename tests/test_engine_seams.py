"""The engine's objects talk through named interfaces, not each other's private members.

A connection hands the peer's frames to its sessions' public handlers (``on_begin``,
``on_flow``, ``on_transfer_run``...), a link asks its session through the session's link
seam (``queue_disposition``, ``send_queued``, ``write_deliveries``...), a session calls its
links' ``on_*`` handlers, and the layers above use the engine's public API alone
(docs/architecture.md, "The engine's seams"). These tests read the source with :mod:`ast`
and fail on an access ``x._name`` that crosses from one object to another.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests import sources

PACKAGE = Path(__file__).resolve().parent.parent / "amqplink"
ENGINE = PACKAGE / "engine"

ALLOWED = {
    "_amqp_encode": "the codec's encoding protocol (codec/encode.py): every generated performative,"
    " section and described type encodes itself with it, and frames.write_frame calls it on the"
    " performative it writes; the name is the generator's (specs/generate.py), not an engine object's",
}
"""Private names an engine module may reach for on another object, each with the reason."""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object's own members."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def crossings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every ``x._name`` in ``tree`` where ``x`` is not the object itself."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and not _own(node.value):
            yield node.lineno, ast.unparse(node)


def engine_private_names() -> set[str]:
    """The private members the engine's classes define: methods, class attributes, slots
    and the attributes their methods set on ``self``."""
    names: set[str] = set()
    for path in ENGINE.glob("*.py"):
        for node in ast.walk(sources.tree(path)):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        names.update(t.id for t in item.targets if isinstance(t, ast.Name))
                        if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets):
                            strings = (e for e in ast.walk(item.value) if isinstance(e, ast.Constant))
                            names.update(e.value for e in strings if isinstance(e.value, str))
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _own(node.value):
                names.add(node.attr)
    return {name for name in names if _private(name)}


def defined_names(package: Path) -> set[str]:
    """Every name a package defines for its own objects (functions, methods, class
    attributes, attributes set on ``self``)."""
    names: set[str] = set()
    for path in package.rglob("*.py") if package.is_dir() else [package]:
        for node in ast.walk(sources.tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def test_engine_objects_use_each_others_public_interface() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text}"
        for path in sorted(ENGINE.glob("*.py"))
        for line, text in crossings(sources.tree(path))
        if text.rsplit(".", 1)[1] not in ALLOWED
    ]
    assert found == [], "use (or add) the collaborator's public seam: docs/architecture.md, The engine's seams"


def test_the_layers_above_use_no_private_engine_member() -> None:
    engine = engine_private_names()
    assert {"_step", "_report", "_blocked"} <= engine  # what the scan below looks for, read from the engine
    found = []
    for package in sorted(PACKAGE.iterdir()):
        if package.name in ("engine", "__pycache__") or not (package.is_dir() or package.suffix == ".py"):
            continue
        # A name the package defines itself is taken for its own member (aio's links have a
        # _fail of their own): a name read from the source cannot tell the two apart.
        suspect = engine - defined_names(package)
        for path in sorted(package.rglob("*.py") if package.is_dir() else [package]):
            for line, text in crossings(sources.tree(path)):
                if text.rsplit(".", 1)[1] in suspect:
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {text}")
    assert found == [], "give the engine a public member for this (docs/architecture.md, The engine's seams)"


def private_imports(tree: ast.AST, origin: str) -> Iterator[tuple[int, str]]:
    """Every ``from <origin>... import _name`` in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(origin):
            for alias in node.names:
                if _private(alias.name):
                    yield node.lineno, f"from {node.module} import {alias.name}"


def test_no_module_imports_a_private_name_of_the_engine() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, text in private_imports(sources.tree(path), "amqplink.engine")
    ]
    assert found == []


def test_a_crossing_is_found() -> None:
    """The scan sees what it must: another object's private member, not the object's own."""
    source = "class A:\n    def f(self, other):\n        self._own()\n        super()._base()\n        other._x()\n"
    assert list(crossings(ast.parse(source))) == [(5, "other._x")]
    imports = "from amqplink.engine.link import _TAG_SPACE, Delivery\nfrom amqplink.codec import _y\n"
    found = list(private_imports(ast.parse(imports), "amqplink.engine"))
    assert found == [(1, "from amqplink.engine.link import _TAG_SPACE")]
