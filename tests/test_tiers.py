"""The test tiers (docs/architecture.md#tests-in-tiers): which tests the fast tier leaves
out, and what a missing peer does: a skip naming the install command in the fast tier, a
failure in a full run, one probe and at most one apt-get run per run either way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import conftest, peers
from tests.peers import Peer, Peers

ROOT = Path(__file__).resolve().parent.parent


class Probe:
    """A peer's presence check that counts how often it is asked."""

    def __init__(self, present: bool) -> None:
        self.answer = present
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.answer


@pytest.fixture()
def fake_peer(monkeypatch: pytest.MonkeyPatch) -> Probe:
    probe = Probe(present=False)
    monkeypatch.setitem(peers.PEERS, "fake", Peer("fake", "the fake broker", probe, apt=("fake-broker",)))
    return probe


def test_a_missing_peer_is_a_skip_naming_the_install_command_probed_once(fake_peer: Probe) -> None:
    run = Peers(full=False)
    for _ in range(3):
        with pytest.raises(pytest.skip.Exception, match="missing; install it with: apt-get install -y fake-broker"):
            run.require("fake")
    assert fake_peer.calls == 1


def test_a_present_peer_passes(fake_peer: Probe) -> None:
    fake_peer.answer = True
    Peers(full=False).require("fake")
    Peers(full=True).require("fake")
    assert fake_peer.calls == 2  # one probe per run


def test_a_full_run_installs_once_then_fails(fake_peer: Probe, monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[list[str]] = []

    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(peers.subprocess, "run", run)
    monkeypatch.setattr(peers.shutil, "which", lambda name: f"/usr/bin/{name}")
    full = Peers(full=True)
    for _ in range(2):
        with pytest.raises(pytest.fail.Exception, match="a full run needs every peer"):
            full.require("fake")
    installs = [cmd for cmd in commands if cmd[:2] == ["apt-get", "install"]]
    assert len(installs) == 1 and "fake-broker" in installs[0]
    assert sum(cmd[:2] == ["apt-get", "update"] for cmd in commands) == 1


def test_a_full_run_passes_when_the_install_brings_the_peer(fake_peer: Probe, monkeypatch: pytest.MonkeyPatch) -> None:
    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if cmd[:2] == ["apt-get", "install"]:
            fake_peer.answer = True
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(peers.subprocess, "run", run)
    monkeypatch.setattr(peers.shutil, "which", lambda name: f"/usr/bin/{name}")
    Peers(full=True).require("fake")


def _item(path: str, name: str, params: dict[str, Any] | None = None) -> Any:
    return SimpleNamespace(
        path=ROOT / "tests" / path, name=name, originalname=name,
        callspec=SimpleNamespace(params=params) if params is not None else None,
    )


@pytest.mark.parametrize(
    ("path", "name", "params", "marks", "needed"),
    [
        ("broker/test_sdk.py", "test_schedule_and_cancel", None, {"sdk"}, {"azure-servicebus"}),
        # a module importing proton is interop; one of its functions importing azure is sdk too
        ("broker/test_sb_auth.py", "test_sdk_in_strict_mode_with_the_right_and_a_wrong_key", None, {"interop", "sdk"},
         {"proton", "azure-servicebus"}),
        ("broker/test_sb_auth.py", "test_strict_mode_refuses_links_without_a_token", None, {"interop"}, {"proton"}),
        ("servicebus/test_scenarios_aio.py", "test_receive_and_delete", {"api": "azure"}, {"sdk"},
         {"azure-servicebus"}),
        ("servicebus/test_scenarios_aio.py", "test_receive_and_delete", {"api": "amqplink"}, set(), set()),
        ("codec/test_codec_proton.py", "test_anything", None, {"interop"}, {"proton"}),
        ("interop/test_soak_smoke.py", "test_the_soak_script_runs_briefly_and_reports_the_broker_s_memory", None,
         {"interop", "slow"}, set()),
        ("engine/test_pairs.py", "test_anything", None, set(), set()),
    ],
)
def test_tiers_follow_what_a_test_imports(
    path: str, name: str, params: dict[str, Any] | None, marks: set[str], needed: set[str]
) -> None:
    assert conftest._needs(_item(path, name, params)) == (marks, needed)


def _collected(*args: str) -> set[str]:
    """What pytest collects with ``args``, outside CI (``CI=true`` would choose every tier)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "HYPOTHESIS_PROFILE")}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False, env=env,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return {line for line in out.stdout.splitlines() if "::" in line}


@pytest.mark.slow
def test_the_fast_tier_leaves_out_every_other_tier() -> None:
    fast, full = _collected(), _collected("--full")
    tiered = _collected("-m", " or ".join(conftest.TIERS))
    assert fast and tiered and fast | tiered == full and not fast & tiered
    assert not any(t.startswith(("tests/interop/", "tests/broker/test_sdk")) or "[azure]" in t for t in fast)
    assert any(t.startswith("tests/broker/test_sdk.py::") for t in tiered)
