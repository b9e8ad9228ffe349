"""amqplink's source files as :mod:`ast` trees, each parsed once per test process: the
static tests (layers, engine seams, doc references) each walk the whole package."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

__all__ = ["tree"]


@functools.cache
def tree(path: Path) -> ast.Module:
    """The parsed source of ``path`` (shared: a test must not change it)."""
    return ast.parse(path.read_text(), str(path))
