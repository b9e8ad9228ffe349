"""Parsing request bodies as XML without entity expansion.

Atom documents need no DTD, so a body with a ``<!DOCTYPE`` (the only place an
``<!ENTITY`` can be declared) is refused before any declaration is read: no entity
expansion ("billion laughs"), no external entities. Depth and element count are
bounded too; any failure is one :class:`XmlError`, never another exception.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from amqplink import AMQPLinkError

__all__ = ["MAX_XML_DEPTH", "MAX_XML_ELEMENTS", "XmlError", "local_name", "parse_xml"]

MAX_XML_DEPTH = 32
"""Elements nested deeper than this are refused (an Atom entry needs five)."""
MAX_XML_ELEMENTS = 10_000
"""Elements one document may hold."""


class XmlError(AMQPLinkError, ValueError):
    """A body that is not an acceptable XML document; the message says why."""


class _Builder(ET.TreeBuilder):
    """A tree builder that refuses a document type declaration and bounds the tree."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0
        self._count = 0

    def doctype(self, name: str, pubid: str | None, system: str | None) -> None:
        raise XmlError("a DOCTYPE (and so any ENTITY declaration) is not accepted")

    def start(self, tag: Any, attrs: dict[Any, Any], /) -> ET.Element:
        self._depth += 1
        self._count += 1
        if self._depth > MAX_XML_DEPTH:
            raise XmlError(f"elements nest deeper than {MAX_XML_DEPTH}")
        if self._count > MAX_XML_ELEMENTS:
            raise XmlError(f"more than {MAX_XML_ELEMENTS} elements")
        return super().start(tag, attrs)

    def end(self, tag: Any, /) -> ET.Element:
        self._depth -= 1
        return super().end(tag)


def parse_xml(body: bytes) -> ET.Element:
    """The root element of ``body``; :class:`XmlError` if it is not well-formed or uses a DTD."""
    parser = ET.XMLParser(target=_Builder())
    try:
        parser.feed(body)
        root = parser.close()
    except XmlError:
        raise
    # LookupError: an encoding the declaration names that Python does not know ("x-bogus")
    except (ET.ParseError, ValueError, TypeError, LookupError, RecursionError) as exc:
        raise XmlError(f"not well-formed XML: {exc}") from None
    if not isinstance(root, ET.Element):
        raise XmlError("no root element")
    return root


def local_name(tag: str) -> str:
    """``{namespace}Name`` -> ``Name``."""
    return tag.rsplit("}", 1)[-1]
