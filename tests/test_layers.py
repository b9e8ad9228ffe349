"""The import graph in docs/architecture.md is the code's, and every import points down.

The table between the ``import-graph`` markers is compared with the graph
:mod:`tests.layers` reads from the source; on a change, paste the rows
``python3 -m tests.layers`` prints.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests import sources
from tests.layers import (
    PACKAGE,
    ROOT,
    import_cycles,
    import_graph,
    imported,
    imports_in,
    module_graph,
    module_name,
    runtime_nodes,
)

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"

RANK = {
    "codec": 0,
    "atom": 0,
    "protocol": 1,
    "sbwire": 1,
    "engine": 2,
    "message": 2,
    "aio": 3,
    "sync": 4,
    "servicebus": 5,
    "broker": 6,
    "spark": 6,
    "commands": 7,
    "cli": 8,
    "__main__": 9,
}
"""A layer may import only layers of a lower rank (docs/architecture.md#layers-and-the-direction-of-imports)."""


def documented_graph() -> dict[str, set[str]]:
    text = DOC.read_text()
    block = text.split("<!-- import-graph -->", 1)[1].split("<!-- /import-graph -->", 1)[0]
    graph = {}
    for row in re.findall(r"^\| `(\w+)` \| (.*) \|$", block, re.M):
        graph[row[0]] = set(re.findall(r"`(\w+)`", row[1]))
    return graph


def test_the_documented_graph_is_the_codes() -> None:
    code = import_graph()
    assert documented_graph() == code, "update docs/architecture.md: python3 -m tests.layers"


def test_every_import_points_down() -> None:
    code = import_graph()
    unranked = sorted(set(code) - set(RANK))
    assert unranked == [], f"give {unranked} a rank in tests/test_layers.py and docs/architecture.md"
    upward = sorted((src, dst) for src, dsts in code.items() for dst in dsts if RANK[dst] >= RANK[src])
    assert upward == []


def test_the_sans_io_layers_import_no_client() -> None:
    code = import_graph()
    for layer in ("codec", "protocol", "engine", "message"):
        assert code[layer] <= {"codec", "protocol"}, layer


def test_the_broker_and_the_service_bus_client_share_only_the_wire_package() -> None:
    code = import_graph()
    assert "servicebus" not in code["broker"]
    assert "broker" not in code["servicebus"]
    assert code["sbwire"] <= {"codec"}


def test_the_broker_s_connection_handlers_do_not_import_its_facade() -> None:
    """``broker/server.py`` (``Broker``: listening, limits, the management API) hands each
    connection to the plain queue broker (``broker/plainserver.py``) or to a Service Bus
    namespace (``broker/sbserver.py``); neither of those imports the facade."""
    broker = PACKAGE / "broker"
    for handlers in ("plainserver", "sbserver"):
        assert "amqplink.broker.server" not in set(imported(broker / f"{handlers}.py")), handlers
    assert {"amqplink.broker.plainserver", "amqplink.broker.sbserver"} <= set(imported(broker / "server.py"))


def test_no_module_imports_itself_through_others() -> None:
    """No import cycle among amqplink's modules, an import inside a function counting as
    one at the top (a deferred import is a cycle dodged, not removed): a handler is given
    its connection and builds no client, the pairing is given its secondary client
    (docs/architecture.md#who-builds-what)."""
    assert import_cycles(module_graph()) == []
    client = module_graph("amqplink.servicebus")["amqplink.servicebus.client"]
    assert {"amqplink.servicebus.holder", "amqplink.servicebus.sender"} <= client  # the graph sees the client's


def test_the_cycle_finder_counts_imports_in_functions_and_not_type_checking_ones() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d", "a"}, "e": set()}
    assert import_cycles(graph) == [["a", "b", "c"]]
    source = """
from typing import TYPE_CHECKING
from amqplink.servicebus import holder, ServiceBusMessage
from . import sender
if TYPE_CHECKING:
    from amqplink.servicebus.client import ServiceBusClient
def standalone():
    from amqplink.servicebus.receiver import ServiceBusReceiver
"""
    modules = frozenset(f"amqplink.servicebus{name}" for name in ("", ".holder", ".sender", ".receiver", ".client"))
    found = sorted(imports_in(runtime_nodes(ast.parse(source)), ("amqplink", "servicebus"), modules))
    assert found == [
        "amqplink.servicebus",  # ServiceBusMessage: a name of the package's __init__
        "amqplink.servicebus.holder",
        "amqplink.servicebus.receiver",  # in a function: it runs
        "amqplink.servicebus.sender",
    ]  # not the client: for the type checker only


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _reaches_in(tree: ast.Module, rel: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """Where the module ``rel`` (``("amqplink", "spark", "writer")``) imports a private
    module or name of another amqplink layer, or reads a private attribute of a name so
    imported (``TYPE_CHECKING`` imports included: a private name is no one else's to type
    against either)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            pairs = [(alias.name, alias.asname or alias.name.split(".")[0], "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(rel[: len(rel) - node.level]) if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            pairs = [(module, alias.asname or alias.name, alias.name) for alias in node.names]
        else:
            continue
        for module, local, name in pairs:
            parts = module.split(".")
            if parts[0] != "amqplink" or len(parts) < 2 or parts[1] == rel[1]:
                continue
            bound.add(local)
            if any(map(_private, [*parts, name])):
                yield node.lineno, f"{module} {name}".rstrip()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                yield node.lineno, ast.unparse(node)


def _reaches(layer: str) -> list[str]:
    found = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("").parts
        found += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in _reaches_in(sources.tree(path), rel)]
    return found


def test_spark_and_the_broker_use_only_public_names_of_other_packages() -> None:
    """What another package needs of one has a public name (docs/architecture.md): the
    Spark connector and the broker import no private module or name of another amqplink
    package, and read no private attribute of one."""
    assert _reaches("spark") == []
    assert _reaches("broker") == []


def test_the_private_reach_check_finds_each_kind_of_reach() -> None:
    source = """
import amqplink.sync.loop
import amqplink.message._id_only
from amqplink.message._id_only import ID_ONLY_HEADS
from amqplink.message import _decode
from ..sync import loop as the_loop
from amqplink.spark import _own
from . import _sibling
from amqplink.message import Message, __all__
import os
the_loop._keeper
amqplink.sync.loop._lock
Message.__name__
os._exit
_own._x
"""
    found = [what for _, what in _reaches_in(ast.parse(source), ("amqplink", "spark", "writer"))]
    assert found == [
        "amqplink.message._id_only",
        "amqplink.message._id_only ID_ONLY_HEADS",
        "amqplink.message _decode",
        "the_loop._keeper",
        "amqplink.sync.loop._lock",
    ]


def _with_lazy_names(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with the imports a package's lazy names (:func:`amqplink._lazy_names`) run
    on first use: those its ``__init__`` spells out for the type checker."""
    modules = frozenset(module_name(path) for path in PACKAGE.rglob("*.py"))
    lazy = {name: set(targets) for name, targets in graph.items()}
    for name in graph:
        init = PACKAGE.parent.joinpath(*name.split("."), "__init__.py")
        if init.exists() and "_lazy_names" in init.read_text():
            found = imports_in(ast.walk(sources.tree(init)), tuple(name.split(".")), modules)
            lazy[name] |= {target for target in found if target in graph and target != name}
    return lazy


def test_the_broker_has_no_import_cycle_through_lazy_names() -> None:
    """No module of ``amqplink.broker`` reaches itself through the imports it runs, a lazy
    name of a package counting as an import (docs/architecture.md#layers-and-the-direction-of-imports):
    the management API's server takes ``DEFAULT_IDLE_TIMEOUT`` from ``broker/config.py``, not
    from the facade (``broker/server.py``) that starts it through ``broker.http``'s lazy names."""
    graph = _with_lazy_names(module_graph("amqplink.broker"))
    assert "amqplink.broker.http.server" in graph["amqplink.broker.http"]  # the lazy names are seen
    assert import_cycles(graph) == []


def test_the_faults_do_not_import_the_host_that_makes_them() -> None:
    """``broker/faults.py`` sees the Service Bus host and its connections through protocols
    (``FaultedHost``, ``FaultedConnection``), not even a type-checking import of ``sbserver``:
    ``control`` -> ``faults`` -> ``sbserver`` -> ``control`` was a cycle for the type checker."""
    tree = sources.tree(PACKAGE / "broker" / "faults.py")
    imported_by_faults = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    hosts = ("amqplink.broker.sbserver", "amqplink.broker.connection")
    assert [module for module in imported_by_faults if module.startswith(hosts)] == []
