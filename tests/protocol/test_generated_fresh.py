"""The committed amqplink/protocol/definitions.py is what specs/generate.py renders today."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "specs" / "generate.py"
GENERATED = ROOT / "amqplink" / "protocol" / "definitions.py"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("amqplink_specs_generate", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return _load_generator()


def test_committed_file_matches_render(generator: ModuleType) -> None:
    rendered = generator.render()
    committed = GENERATED.read_text(encoding="utf-8")
    assert rendered == committed, "definitions.py is stale: run python specs/generate.py"


def test_render_is_deterministic(generator: ModuleType) -> None:
    assert generator.render() == generator.render()
    assert _load_generator().render() == generator.render()


def test_generated_file_says_it_is_generated() -> None:
    head = GENERATED.read_text(encoding="utf-8").splitlines()[:4]
    assert head[0].startswith("# GENERATED FILE")
    assert any("python specs/generate.py" in line for line in head)


def test_check_flag_passes_on_the_committed_file() -> None:
    proc = subprocess.run([sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_check_flag_fails_on_a_stale_file(
    generator: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tmp_path / "definitions.py"
    stale.write_text(generator.render() + "# edited by hand\n", encoding="utf-8")
    monkeypatch.setattr(generator, "OUTPUT_PATH", stale)
    monkeypatch.setattr(generator, "ROOT", tmp_path)
    assert generator.main(["--check"]) == 1
    missing = tmp_path / "absent.py"
    monkeypatch.setattr(generator, "OUTPUT_PATH", missing)
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0
    assert missing.read_text(encoding="utf-8") == generator.render()
    assert generator.main(["--check"]) == 0


def test_the_protocol_package_holds_only_the_generated_code(generator: ModuleType) -> None:
    """``amqplink/protocol/`` is the generator's output and an ``__init__`` that re-exports
    it; hand-written decoders live with their users (the engine's fast path:
    ``amqplink/engine/hot_decode.py``)."""
    package = GENERATED.parent
    assert Path(generator.OUTPUT_PATH).resolve() == GENERATED
    assert sorted(p.name for p in package.glob("*.py")) == ["__init__.py", GENERATED.name]
    tree = ast.parse((package / "__init__.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported == {"__future__", "amqplink.protocol", "amqplink.protocol.definitions"}
