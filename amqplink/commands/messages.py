"""The messages the commands send (``--body``, ``--body-file``, ``--property``,
``--session-id``) and how they show received or peeked ones (``--show``, ``peek``)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amqplink.message import Message

__all__ = ["Outgoing", "describe", "parse_properties", "read_body_file", "show_line"]

SEQUENCE_NUMBER = "x-opt-sequence-number"
ENQUEUED_TIME = "x-opt-enqueued-time"


def parse_properties(values: Sequence[str]) -> dict[str, Any]:
    """``--property`` values: ``K=V`` (V a string) or ``K:=V`` (V as JSON: a number, true,
    false, null or a quoted string), as HTTPie writes them. ``ValueError`` names the bad one."""
    properties: dict[str, Any] = {}
    for value in values:
        key, typed, text = value.partition(":=")
        if not typed:
            key, sep, text = value.partition("=")
            if not sep:
                raise ValueError(f"--property {value!r}: expected NAME=TEXT or NAME:=JSON (e.g. priority:=5)")
        if not key:
            raise ValueError(f"--property {value!r}: the property has no name")
        if typed:
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                raise ValueError(f"--property {key}:= takes a JSON number, true, false, null or string") from None
            if isinstance(parsed, dict | list):
                raise ValueError(f"--property {key}:= takes a single value, not a JSON object or array")
            properties[key] = parsed
        else:
            properties[key] = text
    return properties


def read_body_file(path: str) -> bytes:
    """``--body-file``'s bytes: the file's, or standard input's for ``-`` (as other commands
    read it). ``ValueError`` naming ``--body-file`` for a file that cannot be read."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"--body-file {path}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class Outgoing:
    """What each sent message carries: ``body`` (bytes), application ``properties`` and a ``session_id``."""

    body: bytes
    properties: dict[str, Any]
    session_id: str | None = None

    def message(self, index: int) -> Message:
        """Message number ``index`` (its message-id)."""
        return Message(
            self.body,
            message_id=str(index),
            session_id=self.session_id,
            application_properties=self.properties or None,
        )


def _text(body: Any) -> str:
    if isinstance(body, bytes | bytearray | memoryview):
        data = bytes(body)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data.hex()
    if isinstance(body, list) and all(isinstance(part, bytes | bytearray) for part in body):
        return _text(b"".join(body))
    return body if isinstance(body, str) else json.dumps(body, default=str)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return _text(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def _time(value: Any) -> Any:
    """An AMQP timestamp (milliseconds since the epoch) as ISO 8601 UTC."""
    if isinstance(value, int) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(value / 1000, dt.UTC).isoformat(timespec="milliseconds")
    return _plain(value)


def describe(message: Message) -> dict[str, Any]:
    """A received or peeked message as JSON-ready fields (the body as UTF-8 text, or hex)."""
    annotations = message.message_annotations or {}
    fields: dict[str, Any] = {
        "message_id": _plain(message.message_id),
        "session_id": message.session_id,
        "sequence_number": annotations.get(SEQUENCE_NUMBER),
        "enqueued_time": _time(annotations.get(ENQUEUED_TIME)),
        "properties": _plain(message.application_properties or {}),
        "body": _text(message.body),
    }
    return {key: value for key, value in fields.items() if value not in (None, {})}


def show_line(message: Message, *, as_json: bool) -> str:
    """One output line for ``message``: its body as text, or (``as_json``) :func:`describe`'s fields."""
    if as_json:
        return json.dumps(describe(message))
    return _text(message.body)
