"""``max_connections`` fitted to the file-descriptor limit (docs/broker-limits.md): the
default lowered under Linux's usual ``ulimit -n`` of 1024 is said at INFO, a number the
caller chose and cannot have is a WARNING; both name the limit."""

from __future__ import annotations

import logging
import resource

import pytest

from amqplink.aio import server
from amqplink.aio.server import DEFAULT_MAX_CONNECTIONS, connection_capacity


@pytest.fixture()
def soft_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process may open 1024 files (the limit is faked: lowering it for real would
    starve the test run)."""
    monkeypatch.setattr(server.resource, "getrlimit", lambda which: (1024, resource.RLIM_INFINITY))


@pytest.mark.usefixtures("soft_limit")
@pytest.mark.parametrize(("wanted", "level"), [(DEFAULT_MAX_CONNECTIONS, logging.INFO), (2000, logging.WARNING)])
def test_a_lowered_capacity_is_logged_once_at_its_level(
    wanted: int, level: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=server.__name__)
    assert connection_capacity(wanted) == 1024 - 64
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (level, f"max_connections {wanted} lowered to 960: the process may open 1024 files (raise `ulimit -n` to"
         " serve more)")
    ]  # fmt: skip


@pytest.mark.usefixtures("soft_limit")
def test_a_capacity_that_fits_is_kept_without_a_word(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=server.__name__)
    assert connection_capacity(960) == 960
    assert caplog.records == []
