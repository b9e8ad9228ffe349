"""``amqplink spark-package``: the zip to give ``spark-submit --py-files`` (amqplink and the
module through which Spark finds ``format("servicebus")``), and the line that ships it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from amqplink.spark.package import build_zip, submit_line

__all__ = ["EPILOG", "add_arguments", "run"]

EPILOG = """\
examples:
  amqplink spark-package                        (writes amqplink-<version>-spark.zip here)
  amqplink spark-package -o /tmp/amqplink.zip --json
then: spark-submit --py-files amqplink-<version>-spark.zip ... (pyarrow and pandas<3 must be on
every executor too: a packed virtual environment with --archives, docs/spark.md#shipping)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``spark-package``'s arguments."""
    parser.add_argument("-o", "--output", default=None, help="the zip to write (default amqplink-<version>-spark.zip)")
    parser.add_argument("--json", action="store_true", help="print only a JSON line with the zip's path and size")


async def run(args: argparse.Namespace, summary: dict[str, Any], progress: bool | None) -> dict[str, Any] | None:
    """Write the zip; print its path and the spark-submit line (or one JSON line)."""
    package = build_zip(args.output)
    result = {"zip": str(package.path), "files": package.files, "bytes": package.size}
    if args.json:
        print(json.dumps(result), flush=True)
        return None
    print(f"wrote {package.path} ({package.files} files, {package.size:,} bytes)", flush=True)
    print(f"ship it with: {submit_line(package)}", flush=True)
    print(
        "(pyarrow and pandas<3 must be on every executor: pack a virtual environment that has them, e.g. "
        "venv-pack -o pyspark_env.tar.gz; docs/spark.md#shipping)",
        file=sys.stderr,
        flush=True,
    )
    return None
