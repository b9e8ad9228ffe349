"""The ``$cbs`` and ``$management`` nodes, their operations, and Service Bus's link properties.

docs/protocol.md#management-operations: a request on ``<entity>/$management`` carries the
application property ``operation="com.microsoft:<op>"`` and ``com.microsoft:server-timeout``
(uint ms); docs/protocol.md#claims-based-security-cbs: ``put-token`` on ``$cbs`` with ``type`` one of the token
types below. A session receiver's source filter is ``com.microsoft:session-filter``; the
broker answers ``com.microsoft:locked-until-utc`` (.NET ticks) in the attach properties;
``com.microsoft:timeout`` in the attach properties is how long it may wait (ms).
"""

from __future__ import annotations

import enum

from amqplink.codec.types import Symbol

__all__ = [
    "CBS_NODE",
    "JWT_TOKEN_TYPE",
    "LOCKED_UNTIL_UTC",
    "MANAGEMENT_NODE",
    "OPERATION_TIMEOUT",
    "SAS_TOKEN_TYPE",
    "SERVER_TIMEOUT",
    "SESSION_FILTER",
    "TRANSFER_DESTINATION_ADDRESS",
    "Operation",
]

CBS_NODE = "$cbs"
MANAGEMENT_NODE = "$management"
SAS_TOKEN_TYPE = "servicebus.windows.net:sastoken"
JWT_TOKEN_TYPE = "jwt"
SERVER_TIMEOUT = "com.microsoft:server-timeout"
SESSION_FILTER = Symbol("com.microsoft:session-filter")
LOCKED_UNTIL_UTC = Symbol("com.microsoft:locked-until-utc")
OPERATION_TIMEOUT = Symbol("com.microsoft:timeout")
TRANSFER_DESTINATION_ADDRESS = Symbol("com.microsoft:transfer-destination-address")
"""A sending link's attach property naming where its messages go *via* the link's target (send
via, docs/protocol.md#transactions): the target is the via entity, this the destination."""


class Operation(enum.StrEnum):
    """The ``operation`` application-property of each ``$management`` request."""

    RENEW_LOCK = "com.microsoft:renew-lock"
    PEEK_MESSAGE = "com.microsoft:peek-message"
    SCHEDULE_MESSAGE = "com.microsoft:schedule-message"
    CANCEL_SCHEDULED_MESSAGE = "com.microsoft:cancel-scheduled-message"
    RECEIVE_BY_SEQUENCE_NUMBER = "com.microsoft:receive-by-sequence-number"
    UPDATE_DISPOSITION = "com.microsoft:update-disposition"
    RENEW_SESSION_LOCK = "com.microsoft:renew-session-lock"
    GET_SESSION_STATE = "com.microsoft:get-session-state"
    SET_SESSION_STATE = "com.microsoft:set-session-state"
    GET_MESSAGE_SESSIONS = "com.microsoft:get-message-sessions"
