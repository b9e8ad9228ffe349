"""Light imports: the codec, protocol, message and sans-IO engine load without the
asyncio client (``amqplink/__init__.py`` imports ``connect`` and ``Message`` lazily,
PEP 562), and every public name of the package is still importable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json, sys
import {module}
print(json.dumps(sorted(sys.modules)))
"""


def loaded_after(module: str) -> set[str]:
    """The modules a fresh interpreter holds after ``import module``."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("module", ["amqplink", "amqplink.codec", "amqplink.protocol",
                                    "amqplink.message", "amqplink.engine.connection"])
def test_sans_io_layers_load_no_asyncio_client(module: str) -> None:
    loaded = loaded_after(module)
    client = sorted(m for m in loaded if m.startswith(("amqplink.aio", "amqplink.sync", "amqplink.servicebus",
                                                       "amqplink.broker")))
    assert client == [], f"import {module} loaded {client}"
    assert "asyncio" not in loaded, f"import {module} loaded asyncio"


def test_codec_loads_only_the_codec() -> None:
    ours = {m for m in loaded_after("amqplink.codec") if m.startswith("amqplink")}
    assert ours - {"amqplink"} and all(m.startswith("amqplink.codec") for m in ours - {"amqplink"}), sorted(ours)


def test_public_names_still_importable() -> None:
    import amqplink
    from amqplink import Message, __version__, connect
    from amqplink.aio import connect as aio_connect
    from amqplink.message import Message as message_Message

    assert connect is aio_connect and Message is message_Message
    assert set(amqplink.__all__) <= set(dir(amqplink))
    assert __version__ == amqplink.__version__
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        amqplink.nope  # noqa: B018


BROKER_PROBE = """
import importlib, json, pkgutil, sys
import amqplink.broker
for info in pkgutil.walk_packages(amqplink.broker.__path__, "amqplink.broker."):
    importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""


def test_the_broker_loads_no_service_bus_client_module() -> None:
    """Every module of the broker imported: Service Bus's wire contract comes from
    ``amqplink.sbwire``, never from the client package (docs/architecture.md)."""
    out = subprocess.run(
        [sys.executable, "-c", BROKER_PROBE],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    loaded = set(json.loads(out.stdout))
    assert "amqplink.broker.sbserver" in loaded and "amqplink.sbwire.sas" in loaded
    assert sorted(m for m in loaded if m.startswith("amqplink.servicebus")) == []


def test_the_broker_configuration_has_no_deferred_import() -> None:
    """``broker/config.py`` compiles SQL rules with the namespace's SQL filter; it imports it
    at the top like any other module (no import hidden in a function or a ``TYPE_CHECKING``
    block to dodge a cycle: the namespace package loads its modules lazily)."""
    import ast

    tree = ast.parse((ROOT / "amqplink" / "broker" / "config.py").read_text())
    top = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    nested = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
              and node not in top]  # fmt: skip
    assert nested == []
    assert "amqplink.broker.namespace.sql.filter" in {node.module for node in top if isinstance(node, ast.ImportFrom)}
    for module in ("amqplink.broker.config", "amqplink.broker.namespace.sql.filter", "amqplink.broker.namespace"):
        assert module in loaded_after(module)  # a fresh interpreter imports any of them first
