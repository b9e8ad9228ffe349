"""Clients for the Spark source and sink: from a connection string, or from a token
credential made on each executor by a named factory.

An Azure AD credential (``azure.identity.DefaultAzureCredential`` and the like) holds
locks, threads and HTTP sessions: it does not pickle, and must not be made on the driver and
shipped. The option ``credentialFactory`` therefore names it, ``module:attribute`` (or
``module.attribute``): each Python worker imports the module and calls the attribute with no
arguments, once per worker (cached), for a credential with ``get_token`` (sync or asyncio),
which the client uses for its CBS tokens. ``fullyQualifiedNamespace`` then names the
namespace (``<name>.servicebus.windows.net``); with a connection string as well, its
endpoint gives the namespace and its key is not used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import Any

from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.connection_args import connection_arguments

__all__ = ["check_factory_name", "credential", "make_async_client"]


def check_factory_name(text: str) -> str:
    """``text`` if it reads as ``module:attribute`` or ``module.attribute`` (nothing imported)."""
    module, _, attribute = text.strip().rpartition(":") if ":" in text else text.strip().rpartition(".")
    if not module or not attribute or not all(part.isidentifier() for part in (*module.split("."), attribute)):
        raise ValueError(f"{text!r} is not 'module:callable' (e.g. azure.identity:DefaultAzureCredential)")
    return text.strip()


def _factory(name: str) -> Callable[[], Any]:
    module, _, attribute = name.rpartition(":") if ":" in name else name.rpartition(".")
    try:
        found: object = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(
            f"credentialFactory {name!r} cannot be loaded in this Python worker ({type(exc).__name__}: {exc}): "
            "install the module on every executor"
        ) from None
    if not callable(found):
        raise ValueError(f"credentialFactory {name!r} is not callable")
    return found


@cache
def credential(name: str) -> Any:
    """The credential ``name``'s factory makes, once per Python worker."""
    made = _factory(name)()
    if not hasattr(made, "get_token"):
        raise ValueError(f"credentialFactory {name!r} made a {type(made).__name__}, which has no get_token")
    return made


def make_async_client(config: Any, **kwargs: Any) -> ServiceBusClient:
    """An unopened asyncio client for ``config`` (a :class:`.source_options.SourceConfig` or a
    :class:`.options.SinkConfig`): its ``credential_factory`` if it has one, else its connection
    string; retry settings from the config, ``kwargs`` passed on."""
    options: dict[str, Any] = dict(
        retry_total=config.retry_total,
        retry_backoff_factor=config.retry_backoff_factor,
        retry_backoff_max=config.retry_backoff_max,
        retry_mode=config.retry_mode,
        **kwargs,
    )
    factory = getattr(config, "credential_factory", None)
    if factory is None:
        return ServiceBusClient.from_connection_string(config.connection_string, **options)
    if config.connection_string:  # the namespace (and TLS or not) from its endpoint; its key unused
        args = connection_arguments(config.connection_string)
        return ServiceBusClient(args.namespace, credential(factory), use_tls=args.use_tls, **options)
    return ServiceBusClient(config.fully_qualified_namespace, credential(factory), **options)
