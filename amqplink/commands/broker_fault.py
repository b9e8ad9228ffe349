"""``amqplink broker-fault``: inject or clear a fault in a running broker through ``$control``.

``TARGET`` is the broker's connection string (its key authorises the request) or an
``amqp://HOST:PORT`` URL (with ``--key-name``/``--key``; the emulator's key by
default). Each request carries a SAS token for the namespace root, as
:mod:`amqplink.broker.control` requires.
"""

from __future__ import annotations

import time
from typing import Any

from amqplink import AMQPLinkError
from amqplink.aio import connect
from amqplink.aio.request_response import RequestResponseLink
from amqplink.broker.control import CONTROL_NODE, SECURITY_TOKEN
from amqplink.broker.faults import FaultKind
from amqplink.broker.sbserver import EMULATOR_KEY, EMULATOR_KEY_NAME
from amqplink.commands.target import EXPECTED, is_connection_string
from amqplink.message import Message
from amqplink.sbwire.sas import generate_sas_token
from amqplink.servicebus.connection_string import parse_connection_string

__all__ = ["OPERATIONS", "ControlError", "control_request", "run_broker_fault"]

OPERATIONS = ("clear", "clear-all", "list")
"""What ``broker-fault`` does besides injecting a :class:`FaultKind`."""
TOKEN_TTL = 300
"""Seconds the token minted for one request lives."""


class ControlError(AMQPLinkError, ValueError):
    """``$control`` answered with an error status; the message has its status and description."""


def _endpoint(target: str, key_name: str | None, key: str | None) -> tuple[str, str, str, str | None]:
    """(AMQP URL, key name, key, ready-made token) from a connection string or a URL."""
    if is_connection_string(target):
        parsed = parse_connection_string(target)
        return (
            parsed.amqp_url,
            key_name or parsed.shared_access_key_name or EMULATOR_KEY_NAME,
            key or parsed.shared_access_key or "",
            parsed.shared_access_signature,
        )
    if not target.startswith(("amqp://", "amqps://")):
        raise ValueError(EXPECTED)
    return target, key_name or EMULATOR_KEY_NAME, key or EMULATOR_KEY, None


async def control_request(
    target: str,
    operation: str,
    body: dict[str, Any] | None = None,
    *,
    key_name: str | None = None,
    key: str | None = None,
    timeout: float = 30.0,
) -> Any:
    """Send one ``$control`` request; its answer's body, or :class:`ControlError`."""
    url, name, secret, signature = _endpoint(target, key_name, key)
    host = url.split("://", 1)[1]
    token = signature or generate_sas_token(f"sb://{host}/", name, secret, int(time.time()) + TOKEN_TTL)
    conn = await connect(url, timeout=timeout)
    try:
        pair = await RequestResponseLink.open(conn, CONTROL_NODE, timeout=timeout)
        request = Message(body or {}, application_properties={"operation": operation, SECURITY_TOKEN: token})
        response = await pair.request(request, timeout=timeout)
    finally:
        await conn.close()
    app = response.application_properties or {}
    status = app.get("status-code")
    if status != 200:
        raise ControlError(f"$control refused {operation!r}: {status} {app.get('status-description')}")
    return response.body


async def run_broker_fault(
    target: str,
    fault: str,
    *,
    params: dict[str, Any],
    key_name: str | None = None,
    key: str | None = None,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Inject ``fault`` (a :class:`FaultKind` value) with ``params`` ($control spelling),
    or ``clear`` (``params["id"]``), ``clear-all``, ``list``; the answer as a dict."""
    given = {k: v for k, v in params.items() if v is not None}
    if fault in OPERATIONS:
        body = {"id": given["id"]} if fault == "clear" and "id" in given else {}
        if fault == "clear" and not body:
            raise ValueError("clear needs --id (the id inject printed)")
        answer = await control_request(target, fault, body, key_name=key_name, key=key, timeout=timeout)
        return {"faults": answer} if fault == "list" else dict(answer)
    FaultKind.named(fault)
    given.pop("id", None)
    answer = await control_request(
        target, "inject", {"fault": fault, **given}, key_name=key_name, key=key, timeout=timeout
    )
    return dict(answer)
