"""When AutoLockRenewer renews: ahead of expiry, never after it, soon enough for short locks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from amqplink.servicebus.lock_renewer import RENEW_AHEAD, renew_ahead


@given(st.floats(min_value=0.0, max_value=3600.0))
def test_a_lock_is_renewed_before_it_expires_and_not_too_early(span: float) -> None:
    ahead = renew_ahead(span)
    assert 0.0 <= ahead <= RENEW_AHEAD
    assert ahead <= span / 2 + 1e-9  # at least half the lock is used before renewing
    if span >= 2 * RENEW_AHEAD:
        assert ahead == RENEW_AHEAD  # long locks: the SDK's 10 s margin


def test_short_locks_get_half_their_duration_as_margin() -> None:
    assert renew_ahead(3.0) == 1.5
    assert renew_ahead(60.0) == 10.0
    assert renew_ahead(-1.0) == 0.0
