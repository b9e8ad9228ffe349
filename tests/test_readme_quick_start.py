"""The README's quick start, run as written (issue 34 items 1 and 9): the broker command's
quoted output is what ``amqplink broker`` prints today, and the two Python blocks (the
Service Bus client, then the administration client on the management port with the printed
certificate) run against it and print what the README says. The ports and the certificate's
temporary directory are the ones the broker chose (``--port 0``, ``--http-port 0``)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.docs_text import ROOT, code_blocks

HEADING = "Quick start: a local Service Bus namespace in three steps"
PORT, HTTP_PORT, CA = "5672", "5443", "/tmp/amqplink-http-XXXXXXXX/cert.pem"
"""What the README writes for the ports and the certificate file the broker chooses."""


def _shell() -> tuple[list[str], list[str]]:
    """The quick start's commands and the lines it quotes as their output."""
    (block,) = code_blocks(HEADING, "sh")
    lines = block.splitlines()
    return [line for line in lines if not line.startswith("#")], [line[2:] for line in lines if line.startswith("# ")]


def _pattern(quoted: str) -> re.Pattern[str]:
    """A quoted line as a pattern: its ports and the certificate's directory are the broker's choice."""
    text = re.escape(quoted).replace(re.escape(CA), r"(?P<ca>/\S+/cert\.pem)")
    return re.compile(text.replace(HTTP_PORT, r"(?P<http>\d+)").replace(PORT, r"(?P<port>\d+)"))


@contextlib.contextmanager
def _broker(command: str, quoted: int) -> Iterator[list[str]]:
    """The README's broker command on free ports; its first ``quoted`` lines of output."""
    argv = shlex.split(command)
    assert argv[:2] == ["amqplink", "broker"], command
    argv = [a if a != HTTP_PORT else "0" for a in argv[2:]] + ["--port", "0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "amqplink", "broker", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        printed = []
        while len(printed) < quoted:
            line = proc.stdout.readline()
            assert line, f"the broker ended: {printed} {proc.stderr.read() if proc.stderr else ''}"
            printed.append(line.rstrip("\n"))
        yield printed
    finally:
        proc.terminate()
        proc.wait(20)


def _run(code: str, names: dict[str, object]) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README.md#{HEADING}", "exec"), names)
    return out.getvalue().splitlines()


def test_the_quick_start_runs_as_written() -> None:
    commands, quoted = _shell()
    assert commands[0] == "python3 -m pip install -e '.[broker]'"
    assert "broker = [" in (ROOT / "pyproject.toml").read_text()  # the extra it installs
    with _broker(commands[1], len(quoted)) as printed:
        found: dict[str, str] = {}
        for want, got in zip(quoted, printed, strict=True):
            match = _pattern(want).fullmatch(got)
            assert match is not None, f"the README quotes\n  {want}\nthe broker prints\n  {got}"
            found.update({k: v for k, v in match.groupdict().items() if v is not None})
        client, admin = code_blocks(HEADING, "python")
        names: dict[str, object] = {}
        fast = client.replace(PORT, found["port"]).replace("max_wait_time=5", "max_wait_time=1")
        assert _run(fast, names) == [f"{i} order {i}" for i in range(10)]
        admin = admin.replace(PORT, found["port"]).replace(HTTP_PORT, found["http"]).replace(CA, found["ca"])
        prints = [line for line in admin.splitlines() if line.lstrip().startswith("print(")]
        said = [line.split("# ", 1)[1].split(":")[0] for line in prints]  # what each print's comment says
        assert _run(admin, names) == said
    assert not Path(found["ca"]).exists()  # the broker removed its certificate when it stopped
