"""One root exception: every exception class amqplink defines derives from
:class:`amqplink.AMQPLinkError` (docs/architecture.md#errors), and a name means one thing."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import amqplink
from amqplink import AMQPLinkError

_EXTRAS = {"pyspark", "pyarrow", "pandas", "aiohttp", "cryptography"}
"""Top-level modules of the optional extras (spark, broker): a module needing a missing one is left out."""


def _classes() -> list[type]:
    found = []
    for info in pkgutil.walk_packages(amqplink.__path__, "amqplink."):
        if info.name.endswith(".__main__"):
            continue  # running it is the command itself
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            if exc.name in _EXTRAS:
                continue  # an extra not installed here (the fast tier needs none)
            raise
        found += [value for value in vars(module).values()
                  if inspect.isclass(value) and value.__module__ == module.__name__]  # fmt: skip
    return found


def test_every_exception_of_the_library_derives_from_the_root() -> None:
    """Private ones (``message._decode._Uncommon``, ``engine.hot_decode._Decline``) are signals between two
    functions of one module, never raised to a caller: they are left out."""
    exceptions = [cls for cls in _classes() if issubclass(cls, BaseException) and not cls.__name__.startswith("_")]
    assert len(exceptions) > 40  # the walk did find the layers' errors
    loose = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in exceptions if not issubclass(cls, AMQPLinkError))
    assert loose == []


def test_each_layer_error_is_caught_by_the_root_and_keeps_its_builtin_meaning() -> None:
    from amqplink.aio.errors import AMQPError
    from amqplink.codec.errors import DecodeError
    from amqplink.engine.errors import EngineStateError, ProtocolError
    from amqplink.servicebus.exceptions import MessageAlreadySettled, ServiceBusError

    for cls, builtin in ((DecodeError, ValueError), (EngineStateError, RuntimeError),
                         (MessageAlreadySettled, ValueError)):  # fmt: skip
        assert issubclass(cls, AMQPLinkError) and issubclass(cls, builtin)
    for cls in (ProtocolError, AMQPError, ServiceBusError):
        assert issubclass(cls, AMQPLinkError)
    with pytest.raises(AMQPLinkError):
        amqplink.Message.decode(b"\x00\x53\x77\xff")


def test_service_bus_errors_still_derive_from_azure_core() -> None:
    core = pytest.importorskip("azure.core.exceptions", reason="pip install azure-core")
    from amqplink.servicebus.exceptions import ServiceBusError
    from amqplink.servicebus.management._errors import ResourceNotFoundError

    assert issubclass(ServiceBusError, core.AzureError) and issubclass(ServiceBusError, AMQPLinkError)
    assert issubclass(ResourceNotFoundError, core.ResourceNotFoundError)
    assert issubclass(ResourceNotFoundError, AMQPLinkError)


def test_a_too_large_message_is_one_error_at_every_layer() -> None:
    from amqplink.engine.errors import MessageSizeExceededError as EngineTooLarge
    from amqplink.servicebus.exceptions import MessageSizeExceededError, ServiceBusError

    error = MessageSizeExceededError("too large", condition="amqp:link:message-size-exceeded")
    assert isinstance(error, EngineTooLarge) and isinstance(error, ServiceBusError) and isinstance(error, ValueError)
    assert error.condition == "amqp:link:message-size-exceeded"


def test_one_class_per_name_among_the_broker_queues() -> None:
    from amqplink.broker import PlainQueue, Queue
    from amqplink.broker.namespace import Queue as ServiceBusQueue

    assert Queue is PlainQueue and PlainQueue.__name__ == "PlainQueue"
    assert ServiceBusQueue.__name__ == "Queue" and ServiceBusQueue is not PlainQueue
