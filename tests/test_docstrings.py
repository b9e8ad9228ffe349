"""Every public callable has a docstring (issue 34 item 8): the API reference (pdoc, from the
docstrings) showed 40 callables with nothing, among them the blocking
``ServiceBusAdministrationClient``'s methods and the management enums.

Walks the public modules (no ``_`` in a dotted part below ``amqplink``, as
``scripts/api_docs.py`` does): each function and class a module exports (its ``__all__``,
else what it defines without a leading ``_``), and each public method, property, class- or
static method of those classes, inherited ones included when an amqplink class defines
them (pdoc lists those too). A member documented on a base class counts (``inspect.getdoc``
reads it there, as pdoc does)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from typing import Any

import amqplink

_EXTRAS = {"pyspark", "pyarrow", "pandas", "aiohttp", "cryptography"}


def public_modules() -> Iterator[Any]:
    """Each public module of amqplink that imports here (a missing extra leaves its modules out)."""
    yield amqplink
    for info in pkgutil.walk_packages(amqplink.__path__, "amqplink."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        try:
            yield importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            if exc.name not in _EXTRAS:
                raise


def _exported(module: Any) -> Iterator[tuple[str, Any]]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            name
            for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
        ]
    for name in names:
        value = getattr(module, name)
        if (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__.startswith("amqplink"):
            yield f"{module.__name__}.{name}", value


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((c for c in cls.__mro__ if name in vars(c)), None)
        if owner is None or not owner.__module__.startswith("amqplink"):
            continue
        raw = vars(owner)[name]
        function = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
        function = function.fget if isinstance(function, property) else function
        if inspect.isfunction(function):
            yield name, function


def undocumented() -> tuple[int, list[str]]:
    """How many public callables there are, and those without a docstring."""
    seen: set[int] = set()
    missing: list[str] = []

    def check(where: str, value: Any, doc: str | None) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if not (doc or "").strip():
            missing.append(where)

    for module in public_modules():
        for where, value in _exported(module):
            check(where, value, value.__doc__)
            if inspect.isclass(value):
                for name, function in _members(value):
                    check(f"{where}.{name}", function, inspect.getdoc(getattr(value, name, function)))
    return len(seen), sorted(missing)


def test_every_public_callable_has_a_docstring() -> None:
    count, missing = undocumented()
    assert count > 1000, "the walk found the public API"
    assert missing == [], f"{len(missing)} of {count} public callables have no docstring:\n" + "\n".join(missing)
