"""A user's type checker sees amqplink's types: py.typed is packaged, the editable
install of the README is found by mypy, and the blocking facade keeps the asyncio
API's typed signatures (a misspelt keyword is an error, not ``**options: Any``)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amqplink import aio, sync

ROOT = Path(__file__).resolve().parent.parent

GOOD = """
    import asyncio
    import amqplink
    import amqplink.sync
    from amqplink.aio import Outcome

    def blocking() -> None:
        with amqplink.sync.connect("amqp://localhost", timeout=3.0, idle_timeout=30) as conn:
            sender = conn.create_sender("q", max_in_flight=10, settle_mode="settled")
            outcome: Outcome | None = sender.send("hello")
            receiver = conn.create_receiver("q", mode="peek-lock", prefetch=5)
            for message in receiver.receive(1, timeout=1.0):
                receiver.reject(message, condition="app:bad", description="no")
            print(outcome)

    async def main() -> None:
        async with await amqplink.connect("amqp://localhost", timeout=3.0) as conn:
            sender = await conn.create_sender("q", max_in_flight=10)
            await sender.send({"k": 1})
            await sender.send(amqplink.Message(b"x", message_id="1"))

    asyncio.run(main())
"""

BAD = """
    import amqplink.sync

    conn = amqplink.sync.connect("amqp://localhost", timout=3.0)
    sender = conn.create_sender("q", max_inflight=10)
    receiver = conn.create_receiver("q", mode="peeklock")
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with amqplink installed as the README says (pip install -e .)."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)],
        check=True,
        timeout=300,
        cwd=venv,
        env=_clean_env(),
    )
    return python


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}


def _mypy(python: Path, tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-executable", str(python), script.name],
        cwd=tmp_path,  # outside the repository: only the installed package can be found
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # a fresh virtual environment and mypy: 15-50 s
def test_mypy_strict_passes_a_correct_user_script(installed: Path, tmp_path: Path) -> None:
    result = _mypy(installed, tmp_path, GOOD)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout


@pytest.mark.slow  # a fresh virtual environment and mypy: 15-50 s
def test_mypy_strict_reports_misspelt_keywords_in_a_user_script(installed: Path, tmp_path: Path) -> None:
    result = _mypy(installed, tmp_path, BAD)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "import-not-found" not in result.stdout
    assert 'Unexpected keyword argument "timout"' in result.stdout
    assert 'Unexpected keyword argument "max_inflight"' in result.stdout
    assert '"mode" to "create_receiver"' in result.stdout


@pytest.mark.parametrize(
    ("blocking", "asynchronous"),
    [
        (sync.connect, aio.connect),
        (sync.Connection.create_sender, aio.Connection.create_sender),
        (sync.Connection.create_receiver, aio.Connection.create_receiver),
        (sync.Sender.send, aio.Sender.send),
        (sync.Sender.send_nowait, aio.Sender.send_nowait),
        (sync.Receiver.receive, aio.Receiver.receive),
        (sync.Receiver.accept, aio.Receiver.accept),
        (sync.Receiver.release, aio.Receiver.release),
        (sync.Receiver.modify, aio.Receiver.modify),
        (sync.Receiver.reject, aio.Receiver.reject),
    ],
)
def test_the_blocking_facade_has_the_asyncio_signatures(
    blocking: Callable[..., Any], asynchronous: Callable[..., Any]
) -> None:
    # (send_many differs on purpose: the blocking one takes no async iterable.) The annotations
    # compared as what they name: the facade reads the asyncio ones in their own module, so that
    # the API reference (pdoc, reading them in amqplink.sync) resolves them.
    def shape(function: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
        parameters = inspect.signature(function, eval_str=True).parameters.values()
        return [(p.name, p.kind, p.default, p.annotation) for p in parameters]

    assert shape(blocking) == shape(asynchronous)


NO_CRYPTOGRAPHY = """
    import sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "cryptography" or name.startswith("cryptography."):
                raise ImportError("blocked for this test: " + name)
            return None

    sys.meta_path.insert(0, Block())
    import amqplink.broker
    import amqplink.servicebus
    from amqplink.broker.http.tls import self_signed
    from amqplink.servicebus.sas import generate_sas_token, verify_sas_token

    token = generate_sas_token("sb://ns/q", "k", "secret", 2_000_000_000)
    assert verify_sas_token(token, keys={"k": "secret"}, audience="sb://ns/q", now=0).key_name == "k"
    try:
        self_signed()
    except RuntimeError as exc:
        print("refused:", exc)
    assert "cryptography" not in sys.modules
"""


def test_client_and_broker_import_without_cryptography() -> None:
    """The client is pure Python (SAS signs with the stdlib's hmac); only the broker's
    self-signed certificate needs ``cryptography``, and says so when it is missing."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(NO_CRYPTOGRAPHY)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "amqplink[broker]" in done.stdout
