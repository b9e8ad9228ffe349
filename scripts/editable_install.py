"""Install this checkout editable with some extras, unless that install is in place already:
``python3 scripts/editable_install.py EXTRAS`` (``test``; ``test,broker,spark``).

``bash scripts/test`` runs it before each run (docs/architecture.md#tests-in-tiers): pip
builds the editable wheel again even when nothing changed. The install is in place when

* ``amqplink`` is installed, editable, from this directory (its ``direct_url.json``), with
  the version ``amqplink/__init__.py`` gives, and
* the record this script wrote after its last install from here (``build/editable-install.json``)
  names the same ``pyproject.toml`` (its SHA-256), the same Python, and extras that include
  those asked for.

Otherwise it runs ``python3 -m pip install -q -e .[EXTRAS]`` and writes the record.
"""

from __future__ import annotations

import ast
import hashlib
import json
import site
import subprocess
import sys
from importlib.metadata import Distribution, distributions
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "build" / "editable-install.json"


def wanted(root: Path, extras: str) -> dict[str, Any]:
    """What an install of ``root`` with ``extras`` is, as the record keeps it."""
    return {
        "pyproject": hashlib.sha256((root / "pyproject.toml").read_bytes()).hexdigest(),
        "python": sys.executable,
        "extras": sorted(e for e in extras.split(",") if e),
    }


def source_version(root: Path) -> str | None:
    """``__version__`` as ``amqplink/__init__.py`` assigns it."""
    tree = ast.parse((root / "amqplink" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)  # type: ignore[no-any-return]
    return None


def _installed() -> Distribution | None:
    """The ``amqplink`` pip installed in this Python's site-packages (not a checkout's egg-info)."""
    paths = [*site.getsitepackages(), site.getusersitepackages()]
    return next(iter(distributions(name="amqplink", path=paths)), None)


def why_not_in_place(
    root: Path, want: dict[str, Any], record: dict[str, Any] | None, dist: Distribution | None
) -> str | None:
    """Why the install of ``root`` is not the one ``want`` describes, or None if it is."""
    if dist is None:
        return "amqplink is not installed"
    url = json.loads(dist.read_text("direct_url.json") or "{}")
    if url.get("url") != root.as_uri() or not url.get("dir_info", {}).get("editable"):
        return f"amqplink is installed from {url.get('url', 'an index')}, not editable from {root}"
    if dist.version != source_version(root):
        return f"the installed version is {dist.version}, amqplink/__init__.py says {source_version(root)}"
    if record is None:
        return "no record of an install from here"
    if record.get("pyproject") != want["pyproject"]:
        return "pyproject.toml changed since the last install"
    if record.get("python") != want["python"]:
        return f"the last install was for {record.get('python')}"
    missing = set(want["extras"]) - set(record.get("extras", ()))
    if missing:
        return f"extras not installed yet: {', '.join(sorted(missing))}"
    return None


def main(extras: str) -> int:
    want = wanted(ROOT, extras)
    try:
        record = json.loads(RECORD.read_text())
    except (OSError, ValueError):
        record = None
    reason = why_not_in_place(ROOT, want, record, _installed())
    if reason is None:
        return 0
    print(f"installing amqplink[{extras}] editable ({reason})", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", f".[{extras}]"], cwd=ROOT, check=True)
    RECORD.parent.mkdir(exist_ok=True)
    RECORD.write_text(json.dumps(want) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "test"))
