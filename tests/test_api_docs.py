"""The API reference builds from the docstrings (``python3 scripts/api_docs.py``, named in
the README): every module imports, and pdoc writes a page for each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.peer("pdoc")
def test_the_api_reference_builds_a_page_per_module(tmp_path: Path) -> None:
    out = tmp_path / "api"
    result = subprocess.run(
        [sys.executable, "scripts/api_docs.py", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    modules = sorted(p.relative_to(ROOT).with_suffix("") for p in (ROOT / "amqplink").rglob("*.py"))
    expected = {Path(*m.parts[:-1]) if m.name == "__init__" else m for m in modules}
    public = {m for m in expected if not any(part.startswith("_") for part in m.parts[1:])}
    pages = {p.relative_to(out).with_suffix("") for p in out.rglob("*.html")} - {Path("index")}
    assert public - pages == set()
    receiver = (out / "amqplink" / "servicebus" / "receiver.html").read_text()
    assert "ServiceBusReceiver" in receiver and "complete_message" in receiver
