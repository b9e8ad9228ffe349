"""amqplink: an AMQP 1.0 library that speaks Azure Service Bus's dialect.

Layers (imports point down): ``codec`` <- {``protocol``, ``sbwire``} <- ``engine``
(sans-IO) <- ``aio`` <- {``servicebus``, ``broker``} <- ``cli``; the Service Bus client and
the broker share only ``sbwire``; see ``docs/architecture.md``. Every exception the library
raises derives from :class:`AMQPLinkError`.

The client lives in :mod:`amqplink.aio` (asyncio; ``amqplink.connect`` is its
entry point) and :mod:`amqplink.sync` (blocking); :class:`Message` is shared by both.
The package's names are loaded on first use (PEP 562), so ``import amqplink.codec``
loads the codec alone, not the asyncio client.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from amqplink.aio import connect
    from amqplink.message import Message

__version__ = "0.1.0"
"""The package's version: the only place it is written (pyproject.toml reads it from here)."""
__all__ = ["AMQPLinkError", "Message", "MissingExtraError", "__version__", "connect"]


class AMQPLinkError(Exception):
    """The root of every exception amqplink raises on purpose: ``except AMQPLinkError`` catches
    the codec's, the engine's, the clients' and the broker's errors alike.

    Each layer's errors derive from it (``DecodeError``, ``ProtocolError``, ``AMQPError``,
    ``ServiceBusError``...), and many also from the built-in their meaning matches
    (``ValueError`` for bad input, ``RuntimeError`` for a wrong state). ``ServiceBusError``
    also derives from azure-core's ``AzureError`` when azure-core is installed, as the SDK's
    does. Defined in the package itself, which every module's import runs anyway, so that
    every layer can derive from it (docs/architecture.md#errors).
    """


class MissingExtraError(AMQPLinkError, RuntimeError):
    """A feature needs an optional package that is not installed; the message names the
    package and the extra that brings it (``pip install 'amqplink[broker]'``), in one line
    the ``amqplink`` command prints as it is."""


def _lazy_names(package: str, modules: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package`` (PEP 562), where
    ``modules`` maps each deferred name to the module that defines it: a name's module is
    imported when the name is first asked for, and the value kept in the package, so later
    reads are plain. Defined here, which any import of a submodule runs anyway, for each
    package that defers its imports (this one, ``broker.namespace``, ``broker.http``)."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(modules))

    return __getattr__, __dir__


# name -> the module that defines it; imported on first access.
_LAZY = {"connect": "amqplink.aio", "Message": "amqplink.message"}
__getattr__, __dir__ = _lazy_names(__name__, _LAZY)
