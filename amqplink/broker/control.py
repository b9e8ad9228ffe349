"""``$control``: fault injection from another process, as request/response messages.

Same shape as ``$cbs`` and ``$management`` (docs/protocol.md#request-and-response-links): a sender link with target
``$control`` and a receiver link with source ``$control``; each request carries
``message-id`` and ``reply-to``, the response's ``correlation-id`` is the request's
``message-id``.

Request: application-properties ``operation`` (``inject``, ``clear``, ``clear-all``,
``list``) and ``security_token``; body (amqp-value) for ``inject`` a map such as
``{"fault": "entity-unavailable", "entity": "q", "condition": "amqp:internal-error",
"duration": 5.0}`` (see :meth:`amqplink.broker.faults.Faults.inject`), for ``clear``
``{"id": N}``. Response: application-properties ``status-code`` (200, 400 bad request,
401 unauthorised, 404 no such fault) and ``status-description``; body the fault(s)
as maps, or ``{"cleared": N}``.

Authority: the namespace's manage key. A request is allowed when its
``security_token`` is a valid SAS token for the namespace root (``sb://HOST/``)
signed with one of the broker's keys (every key this broker holds is a
namespace-level manage key, such as ``RootManageSharedAccessKey``), or when its
connection has put such a root token on ``$cbs``. Entity-scoped tokens are refused:
they let a client use one entity, not break the namespace.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from amqplink.broker.faults import FaultError, Faults, describe_all
from amqplink.broker.namespace.cbs import Authorizations
from amqplink.broker.namespace.envelope import as_text
from amqplink.broker.namespace.namespace import entity_path
from amqplink.message import Message
from amqplink.servicebus.sas import SasTokenError, parse_sas_token, verify_sas_token

__all__ = ["CONTROL_NODE", "SECURITY_TOKEN", "handle_control"]

log = logging.getLogger(__name__)

CONTROL_NODE = "$control"
SECURITY_TOKEN = "security_token"
"""The application property carrying the request's SAS token."""


def _response(request: Message, status: int, description: str, body: Any = None) -> Message:
    return Message(
        body,
        application_properties={"status-code": status, "status-description": description},
        correlation_id=request.message_id,
    )


def authorize(token: Any, keys: Mapping[str, str], auth: Authorizations, now: float) -> str | None:
    """Why a ``$control`` request is refused (None: allowed)."""
    if auth.covers("", now):  # a root token put on $cbs
        return None
    if not isinstance(token, str):
        return f"a $control request needs a '{SECURITY_TOKEN}': a SAS token for the namespace root (manage key)"
    try:
        audience = parse_sas_token(token).audience
        if entity_path(audience):
            return f"the token is for {entity_path(audience)!r}; $control needs one for the namespace root"
        verify_sas_token(token, keys=keys, audience=audience, now=now)
    except SasTokenError as exc:
        return f"the token was refused: {exc}"
    return None


def handle_control(
    faults: Faults, keys: Mapping[str, str], auth: Authorizations, request: Message, now: float
) -> Message:
    """Answer one ``$control`` request (never raises for a bad request: a 4xx answer)."""
    app = {str(as_text(k)): as_text(v) for k, v in (request.application_properties or {}).items()}
    refused = authorize(app.get(SECURITY_TOKEN), keys, auth, now)
    if refused is not None:
        log.info("$control: request refused: %s", refused)
        return _response(request, 401, refused)
    operation = app.get("operation")
    body = request.body if isinstance(request.body, dict) else {}
    spec = {str(as_text(k)): as_text(v) for k, v in body.items()}
    try:
        if operation == "inject":
            fault = faults.inject(spec)
            return _response(request, 200, "OK", fault.describe())
        if operation == "clear":
            fault_id = spec.get("id")
            if not isinstance(fault_id, int) or isinstance(fault_id, bool):
                return _response(request, 400, "clear needs the fault's 'id' (a number)")
            if not faults.clear(fault_id):
                return _response(request, 404, f"no active fault {fault_id}")
            return _response(request, 200, "OK", {"cleared": 1})
        if operation == "clear-all":
            return _response(request, 200, "OK", {"cleared": faults.clear_all()})
        if operation == "list":
            return _response(request, 200, "OK", describe_all(faults.active))
    except FaultError as exc:
        return _response(request, 400, str(exc))
    return _response(request, 400, f"operation {operation!r} is not one of inject, clear, clear-all, list")
