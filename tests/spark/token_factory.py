"""A ``credentialFactory`` for the tests: a token credential (``get_token``) whose tokens are
SAS tokens signed with the embedded broker's emulator key, made fresh in each Python worker,
as ``azure.identity.DefaultAzureCredential`` would be."""

from __future__ import annotations

import time
from typing import Any

from amqplink.broker.sbserver import EMULATOR_KEY, EMULATOR_KEY_NAME
from amqplink.sbwire.sas import generate_sas_token
from amqplink.servicebus.sas import AccessToken

MADE: list[Any] = []
"""The credentials made in this process (a worker makes one, however many tasks it runs)."""


class EmulatorTokens:
    """SAS tokens through the token-credential interface (``token_type`` says so, as the SDK's)."""

    token_type = "servicebus.windows.net:sastoken"

    def __init__(self) -> None:
        self.calls = 0

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.calls += 1
        expiry = int(time.time()) + 3600
        return AccessToken(generate_sas_token(scopes[0], EMULATOR_KEY_NAME, EMULATOR_KEY, expiry), expiry)


def make() -> EmulatorTokens:
    """The factory: ``credentialFactory=tests.spark.token_factory:make``."""
    made = EmulatorTokens()
    MADE.append(made)
    return made
