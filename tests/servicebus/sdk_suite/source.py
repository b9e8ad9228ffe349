"""azure-servicebus's own tests: the source distribution of the installed version, fetched with pip.

``python3 -m tests.servicebus.sdk_suite.source`` downloads it (``pip download --no-deps
--no-binary :all: azure-servicebus==VERSION``) and unpacks it under the temporary directory
(or into ``$AMQPLINK_SDK_SOURCE``, which may also name an unpacked copy made elsewhere).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["SOURCE_ENV", "fetch", "present", "source_dir"]

SOURCE_ENV = "AMQPLINK_SDK_SOURCE"


def source_dir() -> Path:
    """Where the unpacked source distribution of the installed azure-servicebus is (or goes)."""
    given = os.environ.get(SOURCE_ENV)
    if given:
        return Path(given)
    return Path(tempfile.gettempdir()) / "amqplink-sdk-source" / f"azure_servicebus-{version('azure-servicebus')}"


def present() -> bool:
    """Whether the management tests are there (never, without azure-servicebus installed)."""
    try:
        return (source_dir() / "tests" / "mgmt_tests").is_dir()
    except PackageNotFoundError:
        return False


def fetch() -> Path:
    """The source distribution's directory, downloaded and unpacked first if missing
    (``RuntimeError`` saying why when pip cannot get it)."""
    target = source_dir()
    if present():
        return target
    wanted = f"azure-servicebus=={version('azure-servicebus')}"
    with tempfile.TemporaryDirectory() as download:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", wanted, "-d", download]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        archives = list(Path(download).glob("*.tar.gz"))
        if done.returncode != 0 or len(archives) != 1:
            raise RuntimeError(f"pip download {wanted} failed: {done.stderr.strip()[-500:]}")
        target.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archives[0]) as archive:
            archive.extractall(target.parent, filter="data")
    unpacked = target.parent / archives[0].name.removesuffix(".tar.gz")
    if unpacked != target:
        unpacked.rename(target)
    return target


if __name__ == "__main__":
    print(fetch())
