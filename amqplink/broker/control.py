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

Authority: Manage on the namespace. A request is allowed when its ``security_token``
is a valid SAS token for the namespace root (``sb://HOST/``, HOST one of the
namespace's names) signed with a namespace rule that has Manage (such as
``RootManageSharedAccessKey``), or when its connection has put such a root token on
``$cbs``. Entity-scoped tokens, and rules without Manage, are refused: they let a client
use entities, not break the namespace.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from amqplink.broker.audience import NamespaceNames
from amqplink.broker.faults import FaultError, Faults, describe_all
from amqplink.broker.namespace.cbs import Authorizations, status_response
from amqplink.broker.namespace.envelope import as_text
from amqplink.broker.rights import AccessRules, Right, describe_rights
from amqplink.message import Message
from amqplink.sbwire.sas import SasTokenError

__all__ = ["CONTROL_NODE", "SECURITY_TOKEN", "handle_control"]

log = logging.getLogger(__name__)

CONTROL_NODE = "$control"
SECURITY_TOKEN = "security_token"
"""The application property carrying the request's SAS token."""


def authorize(
    token: Any,
    keys: Mapping[str, str] | AccessRules,
    auth: Authorizations,
    now: float,
    names: NamespaceNames | None = None,
    local: object = None,
) -> str | None:
    """Why a ``$control`` request is refused (None: allowed); ``names``/``local`` as for ``$cbs``."""
    if auth.covers("", now, Right.MANAGE):  # a root token with Manage put on $cbs
        return None
    if not isinstance(token, str):
        return (
            f"a $control request needs a '{SECURITY_TOKEN}': a SAS token for the namespace root"
            " signed with a rule that has Manage"
        )
    try:
        grant = AccessRules.of(keys).verify(token, now=now, names=names, local=local)
    except SasTokenError as exc:
        return f"the token was refused: {exc}"
    if grant.path:
        return f"the token is for {grant.path!r}; $control needs one for the namespace root"
    if Right.MANAGE not in grant.rights:
        return (
            f"Unauthorized access: $control needs the Manage right on the namespace; rule {grant.rule!r}"
            f" grants {describe_rights(grant.rights)}"
        )
    return None


def handle_control(
    faults: Faults,
    keys: Mapping[str, str] | AccessRules,
    auth: Authorizations,
    request: Message,
    now: float,
    names: NamespaceNames | None = None,
    local: object = None,
) -> Message:
    """Answer one ``$control`` request (never raises for a bad request: a 4xx answer)."""
    app = {str(as_text(k)): as_text(v) for k, v in (request.application_properties or {}).items()}
    refused = authorize(app.get(SECURITY_TOKEN), keys, auth, now, names, local)
    if refused is not None:
        log.info("$control: request refused: %s", refused)
        return status_response(request, 401, refused)
    operation = app.get("operation")
    body = request.body if isinstance(request.body, dict) else {}
    spec = {str(as_text(k)): as_text(v) for k, v in body.items()}
    try:
        if operation == "inject":
            fault = faults.inject(spec)
            return status_response(request, 200, "OK", fault.describe())
        if operation == "clear":
            fault_id = spec.get("id")
            if not isinstance(fault_id, int) or isinstance(fault_id, bool):
                return status_response(request, 400, "clear needs the fault's 'id' (a number)")
            if not faults.clear(fault_id):
                return status_response(request, 404, f"no active fault {fault_id}")
            return status_response(request, 200, "OK", {"cleared": 1})
        if operation == "clear-all":
            return status_response(request, 200, "OK", {"cleared": faults.clear_all()})
        if operation == "list":
            return status_response(request, 200, "OK", describe_all(faults.active))
    except FaultError as exc:
        return status_response(request, 400, str(exc))
    return status_response(request, 400, f"operation {operation!r} is not one of inject, clear, clear-all, list")
