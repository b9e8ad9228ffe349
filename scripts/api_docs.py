"""Build the API reference from the docstrings with pdoc: ``python3 scripts/api_docs.py [OUT]``.

Every module of the ``amqplink`` package is imported first, so that a module that
fails to import stops the build with its traceback (pdoc alone would only warn and
leave the page out); then pdoc writes one HTML page per module into OUT (default
``build/api``; not committed). A package's ``__all__`` hides its submodules from pdoc's
own walk, so the modules are named to it one by one.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def modules() -> list[str]:
    """Every public module of ``amqplink`` (none whose name starts with ``_`` below the top)."""
    sys.path.insert(0, str(ROOT))
    package = importlib.import_module("amqplink")
    return ["amqplink"] + [
        info.name
        for info in pkgutil.walk_packages(package.__path__, "amqplink.")
        if not any(part.startswith("_") for part in info.name.split(".")[1:])
    ]


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "build" / "api"
    names = modules()
    for name in names:
        importlib.import_module(name)  # an import error stops the build here, with its traceback
    try:
        import pdoc  # the `test` extra has it
    except ModuleNotFoundError:
        print("scripts/api_docs.py needs pdoc, in the test extra: python3 -m pip install -e '.[test]'", file=sys.stderr)
        return 2

    # pdoc also walks the submodules of some packages it is given; naming them again only
    # repeats a page, which it warns about.
    warnings.filterwarnings("ignore", message=r"The module specification .* adds a module named")
    pdoc.pdoc(*names, output_directory=out)
    print(f"{len(names)} modules documented in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
