"""``amqplink broker-store DIR``: what a broker's data directory holds, read without
disturbing a broker that may be running on it (entities, message counts by state,
session states, duplicate-detection ids, the entity definitions kept); a damaged journal
(or one cut short of its recovery point, or a damaged recovery point) is reported as an
error (exit status 2) naming the file and the offset or the lengths, as the broker refuses it.
``--salvage`` repairs a damaged directory (no broker running), keeping a copy of each
file it changes and saying what is lost (:mod:`amqplink.broker.durable.salvage`)."""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from amqplink.broker.durable.journal import read_only
from amqplink.broker.durable.records import STATE_CODES
from amqplink.broker.durable.salvage import salvage_directory

__all__ = ["run_broker_store"]

_STATE_NAMES = {code: state.value for state, code in STATE_CODES.items()}


def run_broker_store(directory: str, *, salvage: bool = False) -> dict[str, Any]:
    """The summary of ``directory`` (``StoreError`` if it holds no journal or a damaged one);
    ``salvage``: repair it first (:func:`~amqplink.broker.durable.salvage.salvage_directory`),
    the report under ``"salvaged"``."""
    salvaged = salvage_directory(directory) if salvage else None
    path, state = read_only(directory)
    entities: dict[str, Any] = {}
    for eid, entity_path in sorted(state.entities.items(), key=lambda item: item[1]):
        messages = state.messages.get(eid, {})
        sessions = state.sessions.get(eid, {})
        if not messages and not sessions and eid not in state.next_sequence:
            continue
        counts = Counter(_STATE_NAMES.get(fields[0], "?") for fields in messages.values())
        entities[entity_path] = {
            "messages": len(messages),
            **dict(sorted(counts.items())),
            "bytes": sum(len(fields[6]) for fields in messages.values()),
            "next_sequence": state.next_sequence.get(eid),
            "session_states": len(sessions),
        }
    definitions = json.loads(state.definitions) if state.definitions is not None else {}
    return {
        **({} if salvaged is None else {"salvaged": salvaged}),
        "journal": path,
        "journal_bytes": os.path.getsize(path),
        "entities": entities,
        "duplicate_ids": len(state.duplicates),
        "defined": {
            "queues": [q["name"] for q in definitions.get("queues", [])],
            "topics": {t["name"]: [s["name"] for s in t["subscriptions"]] for t in definitions.get("topics", [])},
        },
    }
