"""The import graph in docs/architecture.md is the code's, and every import points down.

The table between the ``import-graph`` markers is compared with the graph
:mod:`tests.layers` reads from the source; on a change, paste the rows
``python3 -m tests.layers`` prints.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.layers import PACKAGE, import_graph, imported

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
