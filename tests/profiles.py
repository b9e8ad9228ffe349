"""Hypothesis profiles: how many examples the property tests run, chosen per run.

``HYPOTHESIS_PROFILE`` names the profile: ``default`` (quick: the fast tier) or ``ci``
(thorough: ``--full`` and ``CI=true`` choose it unless the variable is set).
``tests/conftest.py`` loads it before any test module is imported.

A test never states a count. A plain ``@given`` runs the profile's ``max_examples``;
a test whose every example is costly, or one that fuzzes cheap inputs, names its kind
and the profile decides the count::

    @settings(profiles.HEAVY, deadline=None)   # each example runs a broker, a store, a loop
    @settings(profiles.FUZZ)                    # many cheap examples of hostile input
"""

from __future__ import annotations

import os

from hypothesis import settings

__all__ = ["COUNTS", "FUZZ", "HEAVY", "PROFILE", "register"]

COUNTS = {
    # profile: (plain, heavy, fuzz) examples per test
    "default": (25, 6, 150),
    "ci": (300, 50, 1500),
}


def register() -> str:
    """Register both profiles and load the one ``HYPOTHESIS_PROFILE`` names; its name."""
    for name, (plain, _, _) in COUNTS.items():
        settings.register_profile(name, max_examples=plain, print_blob=name == "ci")
    name = os.environ.get("HYPOTHESIS_PROFILE", "default")
    if name not in COUNTS:
        raise ValueError(f"HYPOTHESIS_PROFILE={name!r}: expected one of {sorted(COUNTS)}")
    settings.load_profile(name)
    return name


PROFILE = register()
HEAVY = settings(max_examples=COUNTS[PROFILE][1])
"""For tests whose examples each start a broker, a durable store or an event loop."""
FUZZ = settings(max_examples=COUNTS[PROFILE][2])
"""For tests that feed many cheap, hostile inputs (marked ``fuzz``)."""
