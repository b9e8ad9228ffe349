"""The ``amqplink`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from amqplink import __version__


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``amqplink`` command and its sub-commands."""
    parser = argparse.ArgumentParser(
        prog="amqplink",
        description="AMQP 1.0 toolkit: sans-IO engine, client and Service Bus dialect.",
    )
    parser.add_argument("--version", action="version", version=f"amqplink {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``amqplink`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
