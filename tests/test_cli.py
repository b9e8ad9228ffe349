"""The ``amqplink`` command's entry point."""

from __future__ import annotations

import subprocess
import sys

import pytest

from amqplink import __version__
from amqplink.cli import main


def test_help_exits_zero_and_names_the_program(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "amqplink" in capsys.readouterr().out


def test_version_flag_prints_the_package_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    assert __version__ in proc.stdout
