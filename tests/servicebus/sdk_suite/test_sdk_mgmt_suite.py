"""azure-servicebus's own management tests (``tests/mgmt_tests`` of its source distribution, sync and
asyncio) against the embedded broker, through :mod:`.shim` (the SDK's test tooling in live mode).

They run in a pytest of their own (the shim replaces modules and starts a broker: kept out of
this process); every test passes, or is skipped by the SDK's own marks, but those in
:data:`KNOWN`, each a difference the broker keeps, which must fail (so a fix shows here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.servicebus.sdk_suite.source import fetch

pytestmark = pytest.mark.sdk

REPO = Path(__file__).resolve().parents[3]

KNOWN: dict[str, str] = {}
"""The SDK's tests that fail here, and why (where the broker differs): none now. Name a test
and the reason here when the broker keeps a difference; the tier fails on any other failure."""


@pytest.fixture(scope="module")
def outcomes(peer: Callable[[str], None], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each SDK management test's outcome (``passed``, ``failed``, ``skipped``), by test name."""
    try:
        source = fetch()
    except RuntimeError:
        peer("azure-servicebus-tests")  # skips (fast tier) or fails (full run), saying how to get it
        raise
    report = tmp_path_factory.mktemp("sdk-mgmt") / "junit.xml"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "pytest", "-p", "tests.servicebus.sdk_suite.shim", "-p", "no:cacheprovider",
               "-q", "-o", "junit_family=xunit2", f"--junitxml={report}", "mgmt_tests"]  # fmt: skip
    done = subprocess.run(command, cwd=source / "tests", env=env, capture_output=True, text=True, timeout=900)
    assert report.exists(), f"the SDK's tests did not run:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    found: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        found[case.attrib["name"]] = (
            "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        )
    return found


_DEF = r"^\s*(?:async\s+)?def (test_\w+)\("
_SKIPPED_DEF = (
    r"@pytest\.mark\.skip\([^\n]*\n(?:\s*@[^\n]*\n)*\s*(?:async\s+)?def (test_\w+)\("  # marked skip
    r"|def (test_\w+)\([^)]*\)[^:]*:\s*\n\s*pytest\.skip\("  # or skipping as their first statement
)


def _defined_tests(source: Path, pattern: str) -> set[str]:
    """The test functions of the SDK's management test modules that ``pattern`` finds."""
    names: set[str] = set()
    for module in (source / "tests" / "mgmt_tests").rglob("test_*.py"):
        for found in re.finditer(pattern, module.read_text(), re.MULTILINE):
            names.add(next(group for group in found.groups() if group))
    return names


def test_every_sdk_management_test_ran(outcomes: dict[str, str]) -> None:
    """Each test the modules define ran; those skipped are the ones the SDK marks ``skip`` itself."""
    source = fetch()
    assert set(outcomes) == _defined_tests(source, _DEF)
    skipped = {name for name, outcome in outcomes.items() if outcome == "skipped"}
    assert skipped == _defined_tests(source, _SKIPPED_DEF)


def test_the_sdks_management_tests_pass_but_the_known_differences(outcomes: dict[str, str]) -> None:
    failed = {name for name, outcome in outcomes.items() if outcome == "failed"}
    assert failed == set(KNOWN), {
        "failing, not known": sorted(failed - set(KNOWN)),
        "known, now passing": sorted(set(KNOWN) - failed),
    }
