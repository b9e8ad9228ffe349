#!/usr/bin/env python3
"""Generate ``amqplink/protocol/definitions.py`` from ``specs/amqp-1.0.json``.

Usage::

    python specs/generate.py           # (re)write amqplink/protocol/definitions.py
    python specs/generate.py --check   # exit 1 if the committed file is stale

The output depends only on the JSON (no timestamps, no dict-order surprises), so
running the generator twice gives the same bytes. ``render()`` returns the text the
generator would write; the test suite compares it with the committed file.
"""

from __future__ import annotations

import argparse
import json
import keyword
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
SPEC_PATH = ROOT / "specs" / "amqp-1.0.json"
OUTPUT_PATH = ROOT / "amqplink" / "protocol" / "definitions.py"

# How each primitive type is encoded and how it is annotated in Python.
PRIMITIVES: dict[str, tuple[str, str]] = {
    "null": ("encode_null", "None"),
    "boolean": ("encode_boolean", "bool"),
    "ubyte": ("encode_ubyte", "int"),
    "ushort": ("encode_ushort", "int"),
    "uint": ("encode_uint", "int"),
    "ulong": ("encode_ulong", "int"),
    "byte": ("encode_byte", "int"),
    "short": ("encode_short", "int"),
    "int": ("encode_int", "int"),
    "long": ("encode_long", "int"),
    "float": ("encode_float", "float"),
    "double": ("encode_double", "float"),
    "decimal32": ("encode_decimal32", "Decimal32"),
    "decimal64": ("encode_decimal64", "Decimal64"),
    "decimal128": ("encode_decimal128", "Decimal128"),
    "char": ("encode_char", "str"),
    "timestamp": ("encode_timestamp", "int"),
    "uuid": ("encode_uuid", "UUID"),
    "binary": ("encode_binary", "bytes"),
    "string": ("encode_string", "str"),
    "symbol": ("encode_symbol", "Symbol"),
    "list": ("encode_list", "list[Any]"),
    "map": ("encode_map", "dict[Any, Any]"),
    "array": ("encode_array", "list[Any]"),
}

# The Python type amqplink.codec.decode gives each primitive: a field whose value
# decodes to anything else does not carry the type the spec gives it (a decode error).
DECODED_TYPES: dict[str, str] = {
    "boolean": "bool",
    "ubyte": "UByte",
    "ushort": "UShort",
    "uint": "UInt",
    "ulong": "ULong",
    "byte": "Byte",
    "short": "Short",
    "int": "Int",
    "long": "int",
    "float": "Float",
    "double": "float",
    "decimal32": "Decimal32",
    "decimal64": "Decimal64",
    "decimal128": "Decimal128",
    "char": "Char",
    "timestamp": "Timestamp",
    "uuid": "UUID",
    "binary": "bytes",
    "string": "str",
    "symbol": "Symbol",
    "list": "list",
    "map": "dict",
    "array": "Array",
}

# The wrapper class a choice value of each primitive source type is written with.
CHOICE_WRAPPERS: dict[str, str] = {
    "ubyte": "UByte",
    "ushort": "UShort",
    "uint": "UInt",
    "ulong": "ULong",
    "byte": "Byte",
    "short": "Short",
    "int": "Int",
    "symbol": "Symbol",
}

# Annotation names that come from amqplink.codec.types (imported only when used).
CODEC_TYPE_NAMES = (
    "Array",
    "Byte",
    "Char",
    "Decimal32",
    "Decimal64",
    "Decimal128",
    "Float",
    "Int",
    "Short",
    "Symbol",
    "Timestamp",
    "UByte",
    "UInt",
    "ULong",
    "UShort",
)

# Fields whose value is a credential: their repr shows only the length.
SENSITIVE_FIELDS = {("sasl-init", "initial-response"), ("sasl-response", "response")}

# Groups of composites exported as code -> class dictionaries: (name, document or None, provides).
GROUPS = (
    ("PERFORMATIVES", "transport", "frame", "the transport performatives (frame bodies)"),
    ("SASL_FRAMES", "security", "sasl-frame", "the SASL frame bodies"),
    ("DELIVERY_STATES", None, "delivery-state", "every delivery state, terminal or not"),
    ("OUTCOMES", "messaging", "outcome", "the terminal outcomes of the messaging layer"),
    ("LIFETIME_POLICIES", None, "lifetime-policy", "the lifetime policies of dynamic nodes"),
)
# Union type aliases: (alias, dictionary it mirrors).
ALIASES = (
    ("Performative", "PERFORMATIVES"),
    ("SaslFrame", "SASL_FRAMES"),
    ("DeliveryState", "DELIVERY_STATES"),
    ("Outcome", "OUTCOMES"),
    ("Section", "SECTIONS"),
)


def class_name(type_name: str) -> str:
    """CamelCase class name of a spec type; error-condition types get a ``Condition`` suffix."""
    name = "".join(part.capitalize() for part in type_name.split("-"))
    if type_name.endswith("-error"):
        name += "Condition"
    return name


def attr_name(field_name: str) -> str:
    """Python attribute name of a spec field name."""
    name = field_name.replace("-", "_")
    return name + "_" if keyword.iskeyword(name) else name


def const_name(name: str) -> str:
    """UPPER_CASE constant name of a spec choice or definition name."""
    return name.replace("-", "_").upper()


LINE_LIMIT = 110  # the project's line length; generated lines stay within it where they can


def tuple_lines(indent: str, lhs: str, items: Iterable[str]) -> list[str]:
    """``lhs`` followed by a tuple of ``items``: one line if it fits, else one item per line."""
    items = list(items)
    line = f"{indent}{lhs}{tuple_literal(items)}"
    if len(line) <= LINE_LIMIT:
        return [line]
    return [f"{indent}{lhs}(", *filled(indent + "    ", items), f"{indent})"]


def call_lines(indent: str, func: str, args: Iterable[str]) -> list[str]:
    """A call statement: on one line if it fits, else arguments on one or more indented lines."""
    args = list(args)
    line = f"{indent}{func}({', '.join(args)})"
    if len(line) <= LINE_LIMIT:
        return [line]
    inner = f"{indent}    {', '.join(args)}"
    if len(inner) <= LINE_LIMIT:
        return [f"{indent}{func}(", inner, f"{indent})"]
    return [f"{indent}{func}(", *(f"{indent}    {arg}," for arg in args), f"{indent})"]


def _data_flag(t: dict[str, Any]) -> list[str]:
    """``register_composite``'s keyword for a message section: its value is the application's
    data, in which the codec interprets no descriptor (``amqplink.codec.decode``)."""
    return ["data=True"] if "section" in t["provides"] else []


def filled(indent: str, items: Iterable[str], sep: str = ", ", limit: int = LINE_LIMIT) -> list[str]:
    """Pack ``items`` greedily into lines of at most ``limit`` characters (each line ends with sep)."""
    lines: list[str] = []
    current = ""
    for item in items:
        candidate = f"{current}{item}{sep}"
        if current and len(indent) + len(candidate.rstrip()) > limit:
            lines.append(indent + current.rstrip())
            current = f"{item}{sep}"
        else:
            current = candidate
    if current:
        lines.append(indent + current.rstrip())
    return lines


def docstring(indent: str, summary: str, details: Iterable[str] = ()) -> list[str]:
    """A docstring whose summary is wrapped to the line limit."""
    width = LINE_LIMIT - len(indent) - 3
    summary_lines = textwrap.wrap(summary, width=width)
    out = [f'{indent}"""{summary_lines[0]}', *(f"{indent}{line}" for line in summary_lines[1:])]
    details = list(details)
    if details:
        out.append("")
        out += [f"{indent}{line}" for line in details]
    out.append(f'{indent}"""')
    return out


def tuple_literal(items: Iterable[str]) -> str:
    """Python source of a tuple of the given item expressions."""
    items = list(items)
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


class Resolved(NamedTuple):
    """How a field type is carried in Python."""

    encoder: str  # expression of the encoder function
    annotation: str  # Python annotation (without "| None")
    primitive: str | None  # the primitive it resolves to, if any


class Generator:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.types: dict[str, dict[str, Any]] = {t["name"]: t for t in spec["types"]}
        self.descriptions: dict[str, str] = spec["descriptions"]
        self.used: set[str] = set()  # names to import from the codec
        self.multiple_encoders: dict[str, str] = {}  # element encoder -> module-level name

    # -- type resolution -------------------------------------------------------------

    def primitive_of(self, type_name: str) -> str | None:
        """The primitive a restricted chain ends in (None for ``*``)."""
        seen = set()
        while type_name != "*":
            t = self.types[type_name]
            if t["class"] == "primitive":
                return type_name
            if type_name in seen:
                raise ValueError(f"restricted type cycle at {type_name}")
            seen.add(type_name)
            if t["class"] == "composite" or t.get("descriptor"):
                return None
            type_name = t["source"]
        return None

    def choices_type(self, type_name: str) -> dict[str, Any] | None:
        """The restricted type with choices in the chain of ``type_name``, if any."""
        while type_name != "*":
            t = self.types[type_name]
            if t["class"] != "restricted":
                return None
            if t["choices"]:
                return t
            type_name = t["source"]
        return None

    def resolve(self, type_name: str) -> Resolved:
        if type_name == "*":
            self.used.add("encode_value")
            return Resolved("encode_value", "Any", None)
        t = self.types[type_name]
        if t["class"] == "composite" or (t["class"] == "restricted" and t.get("descriptor")):
            self.used.add("encode_value")
            return Resolved("encode_value", class_name(type_name), None)
        primitive = self.primitive_of(type_name)
        assert primitive is not None
        encoder, annotation = PRIMITIVES[primitive]
        self.used.add(encoder)
        if annotation in CODEC_TYPE_NAMES:
            self.used.add(annotation)
        return Resolved(encoder, annotation, primitive)

    def choice_literal(self, choices_type: dict[str, Any], value: str) -> str:
        primitive = self.primitive_of(choices_type["source"])
        if primitive == "boolean":
            return {"true": "True", "false": "False"}[value]
        wrapper = CHOICE_WRAPPERS[str(primitive)]
        self.used.add(wrapper)
        if wrapper == "Symbol":
            return f"Symbol({json.dumps(value)})"
        return f"{wrapper}({int(value, 0)})"

    def default_literal(self, field: dict[str, Any]) -> str:
        """Python expression of a field's spec default ("None" if it has none)."""
        default = field["default"]
        if default is None:
            return "None"
        choices = self.choices_type(field["type"])
        if choices is not None:
            for choice in choices["choices"]:
                if choice["name"] == default:
                    return f"{class_name(choices['name'])}.{const_name(choice['name'])}"
        primitive = self.primitive_of(field["type"])
        if primitive == "boolean":
            return {"true": "True", "false": "False"}[default]
        if primitive in ("ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long", "timestamp"):
            return str(int(default, 0))
        if primitive in ("string", "char"):
            return json.dumps(default)
        if primitive == "symbol":
            self.used.add("Symbol")
            return f"Symbol({json.dumps(default)})"
        raise ValueError(f"cannot express default {default!r} of field {field['name']}")

    # -- pieces ----------------------------------------------------------------------

    def field_encoder(self, field: dict[str, Any]) -> str:
        resolved = self.resolve(field["type"])
        if not field["multiple"]:
            return resolved.encoder
        self.used.add("multiple")
        name = self.multiple_encoders.get(resolved.encoder)
        if name is None:
            name = f"_{resolved.encoder}_multiple"
            self.multiple_encoders[resolved.encoder] = name
        return name

    def field_annotation(self, field: dict[str, Any]) -> str:
        annotation = self.resolve(field["type"]).annotation
        if field["multiple"]:
            annotation = f"list[{annotation}]"
        if annotation == "Any":
            return "Any"
        if field["default"] is None and not field["mandatory"]:
            return f"{annotation} | None"
        return annotation

    def type_test(self, field: dict[str, Any], var: str) -> tuple[str, str] | None:
        """``(condition true when var has the wrong type, spec type name)``, or None for ``*``."""
        type_name = field["type"]
        if type_name == "*":
            return None
        t = self.types[type_name]
        if t["class"] == "composite" or (t["class"] == "restricted" and t.get("descriptor")):
            return f"not isinstance({var}, {class_name(type_name)})", type_name
        primitive = self.primitive_of(type_name)
        assert primitive is not None
        decoded = DECODED_TYPES[primitive]
        self.used.add(decoded)
        return f"type({var}) is not {decoded}", primitive

    def field_decode(self, spec_name: str, index: int, field: dict[str, Any], attr: str) -> list[str]:
        """Straight-line statements that read field ``index`` of ``f`` into ``obj``."""
        out = [f"        v = f[{index}]"]
        default = self.default_literal(field)
        test = self.type_test(field, "e" if field["multiple"] else "v")
        wrong = ""
        if test is not None:
            wrong = f"_wrong_type({json.dumps(spec_name)}, {json.dumps(field['name'])}, {json.dumps(test[1])}, "
        if field["mandatory"]:
            message = f"{spec_name}: mandatory field {field['name']!r} is missing"
            out += ["        if v is None:", f"            raise DecodeError({json.dumps(message)}, 0)"]
        if field["multiple"]:
            # a single value stands for a one-item list
            nested = "" if field["mandatory"] else "    "
            if not field["mandatory"]:
                out.append("        if v is not None:")
            out += [f"        {nested}if not isinstance(v, list):", f"        {nested}    v = [v]"]
            if test is not None:
                out += [
                    f"        {nested}for e in v:",
                    f"        {nested}    if {test[0]}:",
                    f"        {nested}        {wrong}e)",
                ]
        elif field["mandatory"] or default == "None":
            if test is not None:
                guard = test[0] if field["mandatory"] else f"v is not None and {test[0]}"
                out += [f"        if {guard}:", f"            {wrong}v)"]
        else:
            out += ["        if v is None:", f"            v = {default}"]
            if test is not None:
                out += [f"        elif {test[0]}:", f"            {wrong}v)"]
        out.append(f"        obj.{attr} = v")
        return out

    def docline(self, t: dict[str, Any]) -> str:
        desc = self.descriptions[t["name"]]
        if '"""' in desc or "\\" in desc:
            raise ValueError(f"description of {t['name']} cannot go in a docstring")
        d = t.get("descriptor")
        where = f" ({d['name']}, {d['code']})" if d else ""
        return f"{t['name']}{where}: {desc}"

    def choice_class(self, t: dict[str, Any]) -> list[str]:
        cls = class_name(t["name"])
        primitive = self.primitive_of(t["source"])
        value_type = "bool" if primitive == "boolean" else CHOICE_WRAPPERS[str(primitive)]
        lines = [f"class {cls}:"]
        lines += docstring(
            "    ", self.docline(t), [f"Restricted type over {t['source']}; each attribute is one choice."]
        )
        lines += ["", f"    SPEC_NAME: ClassVar[str] = {json.dumps(t['name'])}"]
        for choice in t["choices"]:
            literal = self.choice_literal(t, choice["value"])
            lines.append(f"    {const_name(choice['name'])}: Final[{value_type}] = {literal}")
        lines.append(f"    CHOICES: ClassVar[Mapping[str, {value_type}]] = {{")
        for choice in t["choices"]:
            lines.append(f"        {json.dumps(choice['name'])}: {const_name(choice['name'])},")
        lines.append("    }")
        return lines

    def composite_class(self, t: dict[str, Any]) -> list[str]:
        cls = class_name(t["name"])
        spec_name = t["name"]
        fields = t["fields"]
        d = t["descriptor"]
        code = d["ulong"]
        attrs = [attr_name(f["name"]) for f in fields]
        upper = const_name(spec_name)
        n = len(fields)
        self.used.update(("encode_composite", "register_composite", "DecodeError", "Symbol"))

        out: list[str] = []
        # Module-level encoder and default tables used by _amqp_encode.
        if fields:
            out.append(f"_{upper}_ENCODERS: tuple[_Encoder, ...] = (")
            for f, a in zip(fields, attrs, strict=True):
                out.append(f"    {self.field_encoder(f)},  # {a}")
            out.append(")")
            defaults = [self.default_literal(f) for f in fields]
            out += tuple_lines("", f"_{upper}_DEFAULTS: tuple[Any, ...] = ", defaults)
            out += ["", ""]

        provides = ", ".join(t["provides"]) or "nothing"
        spec_fields = [json.dumps(f["name"]) for f in fields]
        out.append(f"class {cls}:")
        out += docstring("    ", self.docline(t), [f"Composite ({t['source']}); provides: {provides}."])
        out.append("")
        out += tuple_lines("    ", "__slots__ = ", (json.dumps(a) for a in sorted(attrs)))
        out += tuple_lines("    ", "__match_args__ = ", (json.dumps(a) for a in attrs))
        out += ["", f"    SPEC_NAME: ClassVar[str] = {json.dumps(spec_name)}"]
        out += tuple_lines("    ", "SPEC_FIELDS: ClassVar[tuple[str, ...]] = ", spec_fields)
        out += [
            f"    DESCRIPTOR_CODE: ClassVar[int] = 0x{code:08x}",
            f"    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol({json.dumps(d['name'])})",
        ]
        if fields:
            out.append("")
            for f, a in zip(fields, attrs, strict=True):
                notes = [f["type"]]
                if f.get("requires"):
                    notes.append(f"requires {f['requires']}")
                if f["multiple"]:
                    notes.append("multiple")
                if f["mandatory"]:
                    notes.append("mandatory")
                if f["default"] is not None:
                    notes.append(f"default {f['default']}")
                out.append(f"    {a}: {self.field_annotation(f)}  # {', '.join(notes)}")

        # __init__: parameters in spec order; the leading run of mandatory fields is
        # required, every later parameter has a default (None for mandatory ones).
        out.append("")
        if fields:
            out += ["    def __init__(", "        self,"]
            leading = True
            for f, a in zip(fields, attrs, strict=True):
                leading = leading and f["mandatory"]
                annotation = self.field_annotation(f)
                if leading:
                    out.append(f"        {a}: {annotation},")
                elif f["mandatory"]:
                    optional = annotation if annotation == "Any" else f"{annotation} | None"
                    out.append(f"        {a}: {optional} = None,")
                else:
                    out.append(f"        {a}: {annotation} = {self.default_literal(f)},")
            out.append("    ) -> None:")
            for f, a in zip(fields, attrs, strict=True):
                if f["mandatory"]:
                    message = f"{spec_name}: mandatory field {f['name']!r} must not be None"
                    out += [f"        if {a} is None:", f"            raise TypeError({json.dumps(message)})"]
            for a in attrs:
                out.append(f"        self.{a} = {a}")
        else:
            out += ["    def __init__(self) -> None:", "        pass"]

        # _amqp_encode
        values_tuple = tuple_literal(f"self.{a}" for a in attrs)
        tables = [f"_{upper}_ENCODERS", f"_{upper}_DEFAULTS"] if n else ["()", "()"]
        out += ["", "    def _amqp_encode(self, out: bytearray) -> None:"]
        line = f"        encode_composite(out, 0x{code:08x}, {values_tuple}, {', '.join(tables)})"
        if len(line) <= LINE_LIMIT:
            out.append(line)
        else:
            out += tuple_lines("        ", "values = ", (f"self.{a}" for a in attrs))
            out += call_lines("        ", "encode_composite", ["out", f"0x{code:08x}", "values", *tables])

        # _amqp_decode: straight-line, no loop over field metadata.
        got_fields = "{type(fields).__name__}"
        out += [
            "",
            "    @classmethod",
            f"    def _amqp_decode(cls, fields: Any) -> {cls}:",
            "        if not isinstance(fields, list):",
        ]
        message = f'f"{spec_name}: expected a list of fields, got {got_fields}"'
        out += call_lines("            ", "raise DecodeError", [message, "0"])
        if n:
            out += [
                f"        f = fields if len(fields) >= {n} else fields + [None] * ({n} - len(fields))",
                "        obj = cls.__new__(cls)",
            ]
            for i, (f, a) in enumerate(zip(fields, attrs, strict=True)):
                out += self.field_decode(spec_name, i, f, a)
            out.append("        return obj")
        else:
            out.append("        return cls()")

        # __eq__ and __repr__
        out += [
            "",
            "    def __eq__(self, other: object) -> bool:",
            f"        if not isinstance(other, {cls}):",
            "            return NotImplemented",
        ]
        if n == 1:
            out.append(f"        return bool(self.{attrs[0]} == other.{attrs[0]})")
        elif n:
            out.append("        return bool(")
            out.append(f"            self.{attrs[0]} == other.{attrs[0]}")
            out += [f"            and self.{a} == other.{a}" for a in attrs[1:]]
            out.append("        )")
        else:
            out.append("        return True")
        out += ["", "    def __repr__(self) -> str:"]
        if n:
            parts = []
            for f, a in zip(fields, attrs, strict=True):
                if (spec_name, f["name"]) in SENSITIVE_FIELDS:
                    parts.append(f"{a}={{_redacted(self.{a})}}")
                else:
                    parts.append(f"{a}={{self.{a}!r}}")
            line = f'        return f"{cls}({", ".join(parts)})"'
            if len(line) <= LINE_LIMIT:
                out.append(line)
            else:
                parts[0] = f"{cls}({parts[0]}"
                parts[-1] = f"{parts[-1]})"
                chunks = filled("", parts, ", ", limit=LINE_LIMIT - len('            f" "'))
                out.append("        return (")
                for i, chunk in enumerate(chunks):
                    text = chunk.removesuffix(",") if i == len(chunks) - 1 else chunk + " "
                    out.append(f'            f"{text}"')
                out.append("        )")
        else:
            out.append(f'        return "{cls}()"')
        out += ["", ""]
        out += call_lines("", "register_composite", [f"0x{code:08x}", json.dumps(d["name"]), f"{cls}._amqp_decode",
                                                      *_data_flag(t)])
        return out

    def section_class(self, t: dict[str, Any]) -> list[str]:
        """A restricted type with a descriptor (a message section): one ``value`` attribute."""
        cls = class_name(t["name"])
        spec_name = t["name"]
        d = t["descriptor"]
        code = d["ulong"]
        resolved = self.resolve(t["source"]) if t["source"] != "*" else None
        primitive = resolved.primitive if resolved else None
        encoder = resolved.encoder if resolved else "encode_value"
        annotation = resolved.annotation if resolved else "Any"
        self.used.update((encoder, "register_composite", "DecodeError", "Symbol"))
        prefix = f"_{const_name(spec_name)}_PREFIX"
        provides = ", ".join(t["provides"])
        if code > 0xFF:
            raise ValueError(f"{spec_name}: descriptor code {code:#x} does not fit a smallulong")
        out = [
            f'{prefix} = b"\\x00\\x53\\x{code:02x}"  # descriptor constructor, smallulong 0x{code:02x}',
            "",
            "",
            f"class {cls}:",
            *docstring(
                "    ",
                self.docline(t),
                [f"Restricted type over {t['source']} with a descriptor; provides: {provides}."],
            ),
            "",
            '    __slots__ = ("value",)',
            '    __match_args__ = ("value",)',
            "",
            f"    SPEC_NAME: ClassVar[str] = {json.dumps(spec_name)}",
            f"    DESCRIPTOR_CODE: ClassVar[int] = 0x{code:08x}",
            f"    DESCRIPTOR_SYMBOL: ClassVar[Symbol] = Symbol({json.dumps(d['name'])})",
            "",
            f"    value: {annotation}  # {t['source']}",
            "",
            f"    def __init__(self, value: {annotation}) -> None:",
            "        self.value = value",
            "",
            "    def _amqp_encode(self, out: bytearray) -> None:",
            f"        out += {prefix}",
            f"        {encoder}(out, self.value)",
            "",
            "    @classmethod",
            f"    def _amqp_decode(cls, value: Any) -> {cls}:",
        ]
        checks = {"binary": "(bytes, bytearray, memoryview)", "list": "list", "map": "dict"}
        check = checks.get(str(primitive))
        if check is not None:
            got = "{type(value).__name__}"
            out += [
                f"        if not isinstance(value, {check}):",
                f'            raise DecodeError(f"{spec_name}: expected {primitive}, got {got}", 0)',
            ]
        value_expr = "bytes(value)" if primitive == "binary" else "value"
        out += ["        obj = cls.__new__(cls)", f"        obj.value = {value_expr}", "        return obj"]
        out += [
            "",
            "    def __eq__(self, other: object) -> bool:",
            f"        if not isinstance(other, {cls}):",
            "            return NotImplemented",
            "        return bool(self.value == other.value)",
            "",
            "    def __repr__(self) -> str:",
            f'        return f"{cls}({{self.value!r}})"',
            "",
            "",
            *call_lines("", "register_composite", [f"0x{code:08x}", json.dumps(d["name"]), f"{cls}._amqp_decode",
                                                    *_data_flag(t)]),
        ]
        return out

    # -- the module ------------------------------------------------------------------

    def render(self) -> str:
        types = self.spec["types"]
        choice_types = [t for t in types if t["class"] == "restricted" and t["choices"]]
        composites = [t for t in types if t["class"] == "composite"]
        described = [t for t in types if t.get("descriptor")]

        body: list[str] = []
        exported: list[str] = []

        body += ["# -- constants of the specification " + "-" * 52, ""]
        for c in self.spec["constants"]:
            name = const_name(c["name"])
            body.append(f"{name}: Final = {c['value']}  # {c['document']}: {c['section']}")
            exported.append(name)

        body += ["", "", "# -- restricted types with choices " + "-" * 53]
        for t in choice_types:
            body += ["", "", *self.choice_class(t)]
            exported.append(class_name(t["name"]))

        # Described types are emitted in spec order; encoder tables need the multiple()
        # wrappers, which are collected while rendering and placed before them.
        described_lines: list[str] = []
        for t in described:
            described_lines += ["", ""]
            if t["class"] == "composite":
                described_lines += self.composite_class(t)
            else:
                described_lines += self.section_class(t)
            exported.append(class_name(t["name"]))

        body += ["", "", "# -- described types (composites and message sections) " + "-" * 32, ""]
        body.append("_Encoder = Callable[[bytearray, Any], None]")
        for element, name in sorted(self.multiple_encoders.items()):
            body.append(f"{name} = multiple({element})")
        body += described_lines

        # Lookup tables.
        body += ["", "", "# -- lookup tables " + "-" * 68, ""]
        body.append("COMPOSITES: Final[dict[int, type[Any]]] = {")
        body.append("    # every composite type, by descriptor code")
        for t in composites:
            body.append(f"    0x{t['descriptor']['ulong']:08x}: {class_name(t['name'])},")
        body.append("}")
        exported.append("COMPOSITES")
        body.append("SECTIONS: Final[dict[int, type[Any]]] = {")
        body.append("    # the sections of a message, in the order they appear in one")
        for t in described:
            if "section" in t["provides"]:
                body.append(f"    0x{t['descriptor']['ulong']:08x}: {class_name(t['name'])},")
        body.append("}")
        exported.append("SECTIONS")
        for name, document, provides, what in GROUPS:
            body.append(f"{name}: Final[dict[int, type[Any]]] = {{")
            body.append(f"    # {what}")
            for t in composites:
                if provides in t["provides"] and (document is None or t["document"] == document):
                    body.append(f"    0x{t['descriptor']['ulong']:08x}: {class_name(t['name'])},")
            body.append("}")
            exported.append(name)

        body += [""]
        table_members: dict[str, list[str]] = {
            "SECTIONS": [class_name(t["name"]) for t in described if "section" in t["provides"]]
        }
        for name, document, provides, _ in GROUPS:
            table_members[name] = [
                class_name(t["name"])
                for t in composites
                if provides in t["provides"] and (document is None or t["document"] == document)
            ]
        for alias, table in ALIASES:
            line = f"{alias}: TypeAlias = {' | '.join(table_members[table])}"
            if len(line) <= LINE_LIMIT:
                body.append(line)
            else:
                wrapped = filled("    ", table_members[table], " | ")
                wrapped[-1] = wrapped[-1].removesuffix(" |")
                body += [f"{alias}: TypeAlias = (", *wrapped, ")"]
            exported.append(alias)

        body += [
            "",
            "",
            "def _wrong_type(composite: str, field: str, expected: str, value: Any) -> NoReturn:",
            '    """A decoded field does not carry its spec type: the frame cannot be read."""',
            '    raise DecodeError(f"{composite}: field {field!r} must be {expected}, got {type(value).__name__}", 0)',
            "",
            "",
            "def _redacted(value: bytes | None) -> str:",
            '    """What a repr shows instead of a credential."""',
            '    return "None" if value is None else f"<{len(value)} bytes redacted>"',
        ]

        body += ["", "", "__all__ = ["]
        body += [f"    {json.dumps(name)}," for name in sorted(exported)]
        body.append("]")

        return "\n".join(self.header() + self.imports() + body) + "\n"

    def header(self) -> list[str]:
        counts = (
            f"{sum(1 for t in self.spec['types'] if t['class'] == 'composite')} composite types, "
            f"{sum(1 for t in self.spec['types'] if t['class'] == 'restricted' and t.get('descriptor'))} "
            "message sections, "
            f"{sum(1 for t in self.spec['types'] if t['class'] == 'restricted' and t['choices'])} "
            "restricted types with choices"
        )
        return [
            "# GENERATED FILE -- DO NOT EDIT.",
            "# Written by specs/generate.py from specs/amqp-1.0.json.",
            "# To change it, edit the JSON (or the generator) and run:  python specs/generate.py",
            "# To check it is up to date:  python specs/generate.py --check",
            '"""AMQP 1.0 composite and restricted types as Python classes (generated).',
            "",
            f"Contents: {counts}, the spec's constants and",
            "lookup tables by descriptor code.",
            "",
            "Conventions:",
            "",
            "* Class names are the spec names in CamelCase (``sasl-init`` -> ``SaslInit``); the",
            "  error-condition types get a ``Condition`` suffix (``AmqpErrorCondition``).",
            "  Field names are the spec names with ``-`` replaced by ``_``.",
            "* Constructor parameters follow the spec's field order and may be given by",
            "  position or keyword. The leading run of mandatory fields are required",
            "  parameters; every later parameter has a default: the spec default, or ``None``.",
            "  A mandatory field that follows an optional one (``Begin.next_outgoing_id``,",
            "  ``Flow.incoming_window``...) defaults to ``None`` in the signature and the",
            "  constructor raises ``TypeError`` if it is left ``None``.",
            "* Each field is encoded with the encoder of the primitive type its spec type",
            "  resolves to (``handle`` -> uint, ``delivery-tag`` -> binary, ...); fields of type",
            "  ``*`` or of a composite type use the generic encoder; ``multiple`` fields take a",
            "  list (encoded as an array). Trailing fields that are ``None`` or equal to their",
            "  default are left off the wire.",
            "* Decoding (``_amqp_decode``, registered with the codec) fills missing or null",
            "  fields with their defaults, normalises a single value of a ``multiple`` field to",
            "  a one-item list, ignores extra trailing fields and raises ``DecodeError`` when a",
            "  mandatory field is missing or null, or when a field (each item of a ``multiple``",
            "  one) is not of the type its spec type resolves to: the decoder's Python type of",
            "  that primitive (``UInt`` for a handle, ``str`` for a string, ``Symbol`` for a",
            "  symbol...) or an instance of that composite. Fields of type ``*`` are not checked.",
            "* Restricted types with choices are classes of typed constants",
            "  (``SenderSettleMode.MIXED == UByte(2)``), with ``CHOICES`` mapping spec names",
            "  to values. Message sections (restricted types with a descriptor) hold one",
            "  ``value``.",
            "* ``repr`` shows every field, except credentials (SASL responses), which show",
            "  only their length.",
            '"""',
            "",
        ]

    def imports(self) -> list[str]:
        used = self.used
        lines = [
            "from __future__ import annotations",
            "",
            "from collections.abc import Callable, Mapping",
            "from typing import Any, ClassVar, Final, NoReturn, TypeAlias",
        ]
        if "UUID" in used:
            lines.append("from uuid import UUID")
        lines += ["", "from amqplink.codec.decode import register_composite"]
        encoders = sorted(n for n in used if n.startswith("encode_") or n == "multiple")
        lines.append("from amqplink.codec.encode import (")
        lines += [f"    {n}," for n in encoders]
        lines.append(")")
        lines.append("from amqplink.codec.errors import DecodeError")
        codec_types = sorted(n for n in used if n in CODEC_TYPE_NAMES)
        lines.append(f"from amqplink.codec.types import {', '.join(codec_types)}")
        lines += [""]
        return lines


def load_spec(path: Path = SPEC_PATH) -> dict[str, Any]:
    with path.open(encoding="utf-8") as fh:
        spec: dict[str, Any] = json.load(fh)
    return spec


def render(spec_path: Path = SPEC_PATH) -> str:
    """The text of ``amqplink/protocol/definitions.py`` generated from the JSON spec."""
    return Generator(load_spec(spec_path)).render()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the generated file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT_PATH.read_text(encoding="utf-8") if OUTPUT_PATH.exists() else None
        if current != text:
            print(f"{OUTPUT_PATH.relative_to(ROOT)} is stale: run python specs/generate.py", file=sys.stderr)
            return 1
        print(f"{OUTPUT_PATH.relative_to(ROOT)} is up to date")
        return 0
    OUTPUT_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
