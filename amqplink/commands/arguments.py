"""What every sub-command's arguments share: value types whose errors say what is expected
(argparse names a type by its function, which printed ``invalid _non_negative value``), the
help formatter, the parser class, and the ``TARGET``/``ADDRESS`` arguments."""

from __future__ import annotations

import argparse
import textwrap
from typing import NoReturn

__all__ = [
    "HelpFormatter",
    "Parser",
    "add_json",
    "add_target",
    "non_negative",
    "port",
    "positive",
    "seconds",
]


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None


def positive(text: str) -> int:
    """A whole number of at least 1."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative(text: str) -> int:
    """A whole number of at least 0."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 for any free one."""
    value = _whole(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 0..65535 (0: any free port), not {value}")
    return value


def seconds(text: str) -> float:
    """A number of seconds, more than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text}")
    return value


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (exit 2) naming the sub-command
    (its ``prog`` is ``amqplink SUBCOMMAND``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows an option's default once: added as ``(default: X)`` unless the help already
    says what the default is, and never for a flag or an option that is off by default
    (a default of None or False says nothing). Descriptions and examples keep their lines;
    a description line longer than the terminal is wrapped, an indented line (an example
    command, to be copied whole) never is."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        def fill(line: str) -> str:
            if line[:1].isspace() or len(indent + line) <= width:
                return indent + line
            return textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent)

        return "\n".join(fill(line) for line in text.splitlines())

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default is None
            or default is False
            or default == []
            or default is argparse.SUPPRESS
            or not action.option_strings
            or action.nargs == 0
        ):
            return text
        return f"{text} (default: %(default)s)"


def add_target(parser: argparse.ArgumentParser, *, address: bool = True) -> None:
    """The ``TARGET`` (and ``ADDRESS``) positionals of the commands that connect."""
    parser.add_argument(
        "target",
        metavar="TARGET",
        help="the connection string the broker prints, quoted (\"Endpoint=sb://HOST:PORT;SharedAccessKeyName=...\"),"
        " or an amqp://[user:pass@]host[:port] URL (amqps:// for TLS)",
    )
    if address:
        parser.add_argument(
            "address", metavar="ADDRESS", help="queue, topic, or TOPIC/Subscriptions/NAME for a subscription"
        )


def add_json(parser: argparse.ArgumentParser) -> None:
    """``--json``: machine-readable output only."""
    parser.add_argument("--json", action="store_true", help="print only JSON lines (no progress bar)")
