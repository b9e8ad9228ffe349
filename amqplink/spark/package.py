"""What to ship to a Spark cluster whose Python lacks amqplink: one ``.zip`` for ``--py-files``.

Spark puts a ``--py-files`` ``.zip`` or ``.egg`` on the Python path of the driver, of its
data-source workers and of every executor; a wheel it copies but does not put there (so a
wheel there fails with ``ModuleNotFoundError`` in the data-source worker and the executors).
:func:`build_zip` writes the installed ``amqplink`` package and the top-level
``pyspark_servicebus`` module (so Spark finds ``format("servicebus")`` by itself there too)
into one zip. amqplink is pure Python; what it needs on the executors besides is pyarrow and
``pandas<3`` (Spark's Arrow path), which are not pure Python: a packed virtual environment
given to ``--archives`` (docs/spark.md#shipping).
"""

from __future__ import annotations

import importlib.util
import zipfile
from dataclasses import dataclass
from pathlib import Path

import amqplink

__all__ = ["Package", "build_zip", "submit_line"]

_SKIPPED_DIRS = {"__pycache__"}
_SKIPPED_SUFFIXES = {".pyc", ".pyo"}


@dataclass(frozen=True)
class Package:
    """The zip written: its path, the files it holds and its size in bytes."""

    path: Path
    files: int
    size: int


def _module_file(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"{name} is not importable here: install amqplink (it ships {name}) and try again")
    return Path(spec.origin)


def build_zip(output: str | Path | None = None) -> Package:
    """Write ``amqplink`` and ``pyspark_servicebus`` (as installed here) into a zip for
    ``--py-files``; default name ``amqplink-<version>-spark.zip`` in the current directory."""
    target = Path(output) if output is not None else Path(f"amqplink-{amqplink.__version__}-spark.zip")
    package = Path(amqplink.__file__).parent
    extra = _module_file("pyspark_servicebus")
    files = 0
    tmp = target.with_name(f".{target.name}.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*")):
            relative = path.relative_to(package.parent)
            if path.is_dir() or _SKIPPED_DIRS & set(relative.parts) or path.suffix in _SKIPPED_SUFFIXES:
                continue
            archive.write(path, relative.as_posix())
            files += 1
        archive.write(extra, extra.name)
        files += 1
    tmp.replace(target)
    return Package(target, files, target.stat().st_size)


def submit_line(package: Package, environment: str = "pyspark_env.tar.gz") -> str:
    """The ``spark-submit`` options that ship ``package`` and a packed environment."""
    return (
        f"spark-submit --py-files {package.path} --archives {environment}#environment "
        "--conf spark.pyspark.python=./environment/bin/python your_job.py"
    )
