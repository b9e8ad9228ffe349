"""``scripts/test`` installs the checkout only when its install is not in place
(``scripts/editable_install.py``): on a fresh machine, after ``pyproject.toml`` or the version
changes, for more extras, or when the editable install points at another checkout."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("editable_install", ROOT / "scripts" / "editable_install.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


script = _script()


class Installed:
    """What importlib.metadata tells of an installed distribution (the two things read)."""

    def __init__(self, url: str, version: str = "1.2.3", editable: bool = True) -> None:
        self.version = version
        self._direct_url = json.dumps({"url": url, "dir_info": {"editable": editable}})

    def read_text(self, name: str) -> str | None:
        return self._direct_url if name == "direct_url.json" else None


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "amqplink").mkdir()
    (tmp_path / "amqplink" / "__init__.py").write_text('"""doc"""\n\n__version__ = "1.2.3"\n')
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "amqplink"\n')
    return tmp_path


def _why(checkout: Path, extras: str, record: dict[str, Any] | None, dist: Installed | None) -> str | None:
    return script.why_not_in_place(checkout, script.wanted(checkout, extras), record, dist)  # type: ignore[no-any-return]


def test_an_install_from_here_with_the_same_pyproject_is_in_place(checkout: Path) -> None:
    record = script.wanted(checkout, "test,broker,spark")
    assert _why(checkout, "test", record, Installed(checkout.as_uri())) is None
    assert _why(checkout, "spark,test", record, Installed(checkout.as_uri())) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("fresh machine", "amqplink is not installed"),
        ("no record", "no record of an install from here"),
        ("another checkout", "not editable from"),
        ("not editable", "not editable from"),
        ("pyproject.toml", "pyproject.toml changed since the last install"),
        ("version", "the installed version is 1.2.3, amqplink/__init__.py says 1.3.0"),
        ("more extras", "extras not installed yet: broker"),
        ("another python", "the last install was for /other/python"),
    ],
)
def test_anything_else_is_installed_again_saying_why(checkout: Path, change: str, reason: str) -> None:
    record: dict[str, Any] | None = script.wanted(checkout, "test")
    dist: Installed | None = Installed(checkout.as_uri())
    extras = "test"
    if change == "fresh machine":
        record, dist = None, None
    elif change == "no record":
        record = None
    elif change == "another checkout":
        dist = Installed((checkout.parent / "main").as_uri())
    elif change == "not editable":
        dist = Installed(checkout.as_uri(), editable=False)
    elif change == "pyproject.toml":
        (checkout / "pyproject.toml").write_text('[project]\nname = "amqplink"\ndependencies = ["x"]\n')
    elif change == "version":
        (checkout / "amqplink" / "__init__.py").write_text('__version__ = "1.3.0"\n')
    elif change == "more extras":
        extras = "test,broker"
    elif change == "another python":
        assert record is not None
        record["python"] = "/other/python"
    why = _why(checkout, extras, record, dist)
    assert why is not None and reason in why
