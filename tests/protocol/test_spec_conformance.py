"""specs/amqp-1.0.json against the OASIS AMQP 1.0 XML, and the generated classes against the JSON.

The XML is Debian's ``amqp-specs`` package (/usr/share/amqp/specs/1-0/*.bare.xml), the
``amqp-specs`` peer of tests/peers.py: when it is missing, the tests that read it are
skipped in the fast tier (with the install command) and fail a full run (``--full``,
CI), after one attempt to install it.
"""

from __future__ import annotations

import inspect
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amqplink.codec.decode import registered_composites
from amqplink.codec.types import Byte, Int, Short, Symbol, UByte, UInt, ULong, UShort
from amqplink.protocol import definitions

ROOT = Path(__file__).resolve().parents[2]
SPEC_JSON = ROOT / "specs" / "amqp-1.0.json"
SERVICEBUS_JSON = ROOT / "specs" / "servicebus.json"
XML_DIR = Path("/usr/share/amqp/specs/1-0")
DOCUMENTS = ("types", "transport", "messaging", "security", "transactions")
NS = "{http://www.amqp.org/schema/amqp.xsd}"


# -- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def xml_roots(peer: Callable[[str], None]) -> dict[str, ET.Element]:
    peer("amqp-specs")
    roots = {}
    for doc in DOCUMENTS:
        path = XML_DIR / f"{doc}.bare.xml"
        assert path.is_file(), f"{path} is missing"
        root = ET.parse(path).getroot()
        assert root.get("name") == doc
        roots[doc] = root
    return roots


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    with SPEC_JSON.open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@pytest.fixture(scope="module")
def xml_types(xml_roots: dict[str, ET.Element]) -> dict[str, list[dict[str, Any]]]:
    """Every <type> of each document, read straight from the XML, as plain dicts."""
    out: dict[str, list[dict[str, Any]]] = {}
    for doc, root in xml_roots.items():
        types = []
        for section in root.findall(f"{NS}section"):
            for el in section.findall(f"{NS}type"):
                types.append({"element": el, "section": section.get("name")})
        out[doc] = types
    return out


def _json_types(spec: dict[str, Any], doc: str) -> list[dict[str, Any]]:
    return [t for t in spec["types"] if t["document"] == doc]


def _code_to_int(code: str) -> int:
    hi, lo = code.split(":")
    return (int(hi, 16) << 32) | int(lo, 16)


# -- the JSON against the XML ----------------------------------------------------------


def test_json_lists_the_documents_in_order(spec: dict[str, Any]) -> None:
    assert spec["documents"] == list(DOCUMENTS)
    assert {t["document"] for t in spec["types"]} == set(DOCUMENTS)


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_same_type_names_per_document(
    doc: str, spec: dict[str, Any], xml_types: dict[str, list[dict[str, Any]]]
) -> None:
    xml_names = [x["element"].get("name") for x in xml_types[doc]]
    json_names = [t["name"] for t in _json_types(spec, doc)]
    assert set(json_names) - set(xml_names) == set(), "types in the JSON that the XML does not define"
    assert set(xml_names) - set(json_names) == set(), "types of the XML missing from the JSON"
    assert json_names == xml_names, "types are not in the XML's order"
    assert len(json_names) == len(set(json_names))


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_every_type_matches_the_xml(doc: str, spec: dict[str, Any], xml_types: dict[str, list[dict[str, Any]]]) -> None:
    by_name = {t["name"]: t for t in _json_types(spec, doc)}
    checked = 0
    for x in xml_types[doc]:
        el: ET.Element = x["element"]
        name = el.get("name")
        t = by_name[name]
        where = f"{doc}/{name}"
        assert t["section"] == x["section"], where
        assert t["class"] == el.get("class"), where
        # Nothing in the element goes unread: only these children and attributes exist.
        assert set(el.attrib) <= {"name", "class", "source", "provides"}, where
        assert {child.tag[len(NS) :] for child in el} <= {"descriptor", "field", "choice", "encoding"}, where

        if el.get("class") == "primitive":
            assert set(t) == {"name", "document", "section", "class", "encodings"}, where
            xml_encodings = [
                {
                    "name": e.get("name"),
                    "code": e.get("code"),
                    "category": e.get("category"),
                    "width": int(e.get("width", "-1")),
                }
                for e in el.findall(f"{NS}encoding")
            ]
            assert t["encodings"] == xml_encodings, where
            checked += 1
            continue

        assert t["source"] == el.get("source"), where
        provides = el.get("provides")
        assert t["provides"] == ([p.strip() for p in provides.split(",")] if provides else []), where

        d = el.find(f"{NS}descriptor")
        if d is None:
            assert t["descriptor"] is None, where
        else:
            assert set(d.attrib) == {"name", "code"}, where
            assert t["descriptor"] == {
                "name": d.get("name"),
                "code": d.get("code"),
                "ulong": _code_to_int(d.get("code", "")),
            }, where

        xml_fields = [
            {
                "name": f.get("name"),
                "type": f.get("type"),
                "mandatory": f.get("mandatory") == "true",
                "multiple": f.get("multiple") == "true",
                "default": f.get("default"),
                "requires": f.get("requires"),
            }
            for f in el.findall(f"{NS}field")
        ]
        for f in el.findall(f"{NS}field"):
            assert set(f.attrib) <= {"name", "type", "mandatory", "multiple", "default", "requires"}, where
            assert f.get("mandatory", "false") in ("true", "false"), where
            assert f.get("multiple", "false") in ("true", "false"), where
        xml_choices = [{"name": c.get("name"), "value": c.get("value")} for c in el.findall(f"{NS}choice")]

        if el.get("class") == "composite":
            assert set(t) == {"name", "document", "section", "class", "source", "provides", "descriptor", "fields"}, (
                where
            )
            assert t["fields"] == xml_fields, where
            assert xml_choices == [], where
        else:
            assert el.get("class") == "restricted", where
            assert set(t) == {"name", "document", "section", "class", "source", "provides", "descriptor", "choices"}, (
                where
            )
            assert t["choices"] == xml_choices, where
            assert xml_fields == [], where
        checked += 1
    assert checked == len(by_name)


def test_constants_match_the_xml_definitions(spec: dict[str, Any], xml_roots: dict[str, ET.Element]) -> None:
    xml_constants = []
    for doc, root in xml_roots.items():
        for section in root.findall(f"{NS}section"):
            for el in section.findall(f"{NS}definition"):
                xml_constants.append(
                    {"name": el.get("name"), "value": el.get("value"), "document": doc, "section": section.get("name")}
                )
    json_constants = [dict(c, value=str(c["value"])) for c in spec["constants"]]
    assert json_constants == xml_constants


def test_every_xml_element_is_accounted_for(xml_roots: dict[str, ET.Element], spec: dict[str, Any]) -> None:
    """Count every element of the XML and compare with what the JSON holds."""
    counts = {"section": 0, "type": 0, "definition": 0, "descriptor": 0, "field": 0, "choice": 0, "encoding": 0}
    for root in xml_roots.values():
        for el in root.iter():
            tag = el.tag[len(NS) :]
            if tag == "amqp":
                continue
            assert tag in counts, f"unexpected element <{tag}> in the XML"
            counts[tag] += 1
    types = spec["types"]
    assert counts["type"] == len(types)
    assert counts["definition"] == len(spec["constants"])
    assert counts["descriptor"] == sum(1 for t in types if t.get("descriptor"))
    assert counts["field"] == sum(len(t.get("fields", [])) for t in types)
    assert counts["choice"] == sum(len(t.get("choices", [])) for t in types)
    assert counts["encoding"] == sum(len(t.get("encodings", [])) for t in types)
    sections = {(t["document"], t["section"]) for t in types} | {
        (c["document"], c["section"]) for c in spec["constants"]
    }
    assert counts["section"] == len(sections)


def test_descriptions_one_short_line_per_type(spec: dict[str, Any]) -> None:
    descriptions = spec["descriptions"]
    assert list(descriptions) == [t["name"] for t in spec["types"]]
    for name, text in descriptions.items():
        assert text.strip() == text and text, name
        assert "\n" not in text and len(text) <= 110, name


def test_types_resolve(spec: dict[str, Any]) -> None:
    """Every field type, restricted source and default names something the spec defines."""
    types = {t["name"]: t for t in spec["types"]}
    provided = {p for t in spec["types"] for p in t.get("provides", [])}
    for t in spec["types"]:
        if t["class"] == "restricted":
            assert t["source"] in types or t["source"] == "*", t["name"]
        for f in t.get("fields", []):
            assert f["type"] in types or f["type"] == "*", (t["name"], f["name"])
            if f["requires"] is not None:
                # Archetypes that only outside specs provide (e.g. global-tx-id) are fine.
                assert f["requires"] in provided | {"global-tx-id"}, (t["name"], f["name"])
            if f["default"] is not None:
                choice_names = _choice_names(types, f["type"])
                if choice_names:
                    assert f["default"] in choice_names, (t["name"], f["name"])


def _choice_names(types: dict[str, Any], type_name: str) -> set[str]:
    while type_name in types and types[type_name]["class"] == "restricted":
        if types[type_name]["choices"]:
            return {c["name"] for c in types[type_name]["choices"]}
        type_name = types[type_name]["source"]
    return set()


# -- the generated classes against the JSON ----------------------------------------------


def _class_name(type_name: str) -> str:
    name = "".join(part.capitalize() for part in type_name.split("-"))
    return name + "Condition" if type_name.endswith("-error") else name


def _attr(field_name: str) -> str:
    return field_name.replace("-", "_")


def _primitive(types: dict[str, Any], type_name: str) -> str | None:
    while type_name in types:
        t = types[type_name]
        if t["class"] == "primitive":
            return type_name
        if t["class"] == "composite" or t.get("descriptor"):
            return None
        type_name = t["source"]
    return None


_WRAPPERS: dict[str, type] = {
    "ubyte": UByte,
    "ushort": UShort,
    "uint": UInt,
    "ulong": ULong,
    "byte": Byte,
    "short": Short,
    "int": Int,
    "symbol": Symbol,
}


def _choice_value(types: dict[str, Any], t: dict[str, Any], value: str) -> Any:
    primitive = _primitive(types, t["source"])
    if primitive == "boolean":
        return {"true": True, "false": False}[value]
    wrapper = _WRAPPERS[str(primitive)]
    return wrapper(value) if wrapper is Symbol else wrapper(int(value, 0))


def _expected_default(types: dict[str, Any], field: dict[str, Any]) -> Any:
    default = field["default"]
    if default is None:
        return None
    type_name = field["type"]
    while type_name in types and types[type_name]["class"] == "restricted":
        t = types[type_name]
        for c in t["choices"]:
            if c["name"] == default:
                return _choice_value(types, t, c["value"])
        type_name = t["source"]
    primitive = _primitive(types, field["type"])
    if primitive == "boolean":
        return {"true": True, "false": False}[default]
    if primitive == "symbol":
        return Symbol(default)
    return int(default)


def test_composite_classes_agree_with_the_json(spec: dict[str, Any]) -> None:
    types = {t["name"]: t for t in spec["types"]}
    composites = [t for t in spec["types"] if t["class"] == "composite"]
    assert len(composites) == 33
    for t in composites:
        cls = getattr(definitions, _class_name(t["name"]))
        where = t["name"]
        assert t["name"] == cls.SPEC_NAME, where
        assert t["descriptor"]["ulong"] == cls.DESCRIPTOR_CODE, where
        assert t["descriptor"]["name"] == cls.DESCRIPTOR_SYMBOL, where
        assert isinstance(cls.DESCRIPTOR_SYMBOL, Symbol), where
        assert tuple(f["name"] for f in t["fields"]) == cls.SPEC_FIELDS, where
        attrs = [_attr(f["name"]) for f in t["fields"]]
        assert list(cls.__match_args__) == attrs, where
        assert sorted(cls.__slots__) == sorted(attrs), where
        params = list(inspect.signature(cls).parameters.values())
        assert [p.name for p in params] == attrs, where
        leading = True
        for p, f in zip(params, t["fields"], strict=True):
            leading = leading and f["mandatory"]
            if leading:
                assert p.default is inspect.Parameter.empty, (where, f["name"])
            else:
                expected = _expected_default(types, f)
                assert p.default == expected, (where, f["name"])
                assert type(p.default) is type(expected), (where, f["name"])
        assert definitions.COMPOSITES[t["descriptor"]["ulong"]] is cls
    assert len(definitions.COMPOSITES) == len(composites)


def test_section_classes_agree_with_the_json(spec: dict[str, Any]) -> None:
    sections = [t for t in spec["types"] if t["class"] == "restricted" and t["descriptor"]]
    assert [t["name"] for t in sections] == [
        "delivery-annotations",
        "message-annotations",
        "application-properties",
        "data",
        "amqp-sequence",
        "amqp-value",
        "footer",
    ]
    for t in sections:
        cls = getattr(definitions, _class_name(t["name"]))
        assert t["name"] == cls.SPEC_NAME
        assert t["descriptor"]["ulong"] == cls.DESCRIPTOR_CODE
        assert t["descriptor"]["name"] == cls.DESCRIPTOR_SYMBOL
        assert cls.__slots__ == ("value",)
    section_types = [t for t in spec["types"] if "section" in t.get("provides", [])]
    assert {code: cls.SPEC_NAME for code, cls in definitions.SECTIONS.items()} == {
        t["descriptor"]["ulong"]: t["name"] for t in section_types
    }


def test_choice_classes_agree_with_the_json(spec: dict[str, Any]) -> None:
    types = {t["name"]: t for t in spec["types"]}
    with_choices = [t for t in spec["types"] if t["class"] == "restricted" and t["choices"]]
    assert len(with_choices) == 13
    for t in with_choices:
        cls = getattr(definitions, _class_name(t["name"]))
        assert t["name"] == cls.SPEC_NAME
        expected = {c["name"]: _choice_value(types, t, c["value"]) for c in t["choices"]}
        assert dict(cls.CHOICES) == expected, t["name"]
        for c in t["choices"]:
            value = getattr(cls, c["name"].replace("-", "_").upper())
            assert value == expected[c["name"]] and type(value) is type(expected[c["name"]]), c["name"]


def test_lookup_tables_agree_with_provides(spec: dict[str, Any]) -> None:
    def codes(provides: str, document: str | None = None) -> set[int]:
        return {
            t["descriptor"]["ulong"]
            for t in spec["types"]
            if t["class"] == "composite"
            and provides in t["provides"]
            and (document is None or t["document"] == document)
        }

    assert set(definitions.PERFORMATIVES) == codes("frame") == set(range(0x10, 0x19))
    assert set(definitions.SASL_FRAMES) == codes("sasl-frame") == set(range(0x40, 0x45))
    assert set(definitions.DELIVERY_STATES) == codes("delivery-state")
    assert set(definitions.OUTCOMES) == codes("outcome", "messaging") == {0x24, 0x25, 0x26, 0x27}
    assert set(definitions.LIFETIME_POLICIES) == codes("lifetime-policy")


def test_every_descriptor_is_registered_with_the_decoder(spec: dict[str, Any]) -> None:
    registered = registered_composites()
    described = [t for t in spec["types"] if t.get("descriptor")]
    assert len(described) == 40
    for t in described:
        assert registered.get(t["descriptor"]["ulong"]) == t["descriptor"]["name"], t["name"]


def test_constants_are_generated(spec: dict[str, Any]) -> None:
    for c in spec["constants"]:
        assert getattr(definitions, c["name"].replace("-", "_")) == c["value"]


# -- specs/servicebus.json ---------------------------------------------------------------


@pytest.fixture(scope="module")
def servicebus() -> dict[str, Any]:
    with SERVICEBUS_JSON.open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def test_servicebus_message_annotations(servicebus: dict[str, Any]) -> None:
    assert {a["name"]: a["type"] for a in servicebus["message_annotations"]} == {
        "x-opt-sequence-number": "long",
        "x-opt-enqueued-time": "timestamp",
        "x-opt-locked-until": "timestamp",
        "x-opt-enqueue-sequence-number": "long",
        "x-opt-scheduled-enqueue-time": "timestamp",
        "x-opt-partition-key": "string",
        "x-opt-via-partition-key": "string",
        "x-opt-deadletter-source": "string",
        "x-opt-lock-token": "uuid",
    }


def test_servicebus_error_conditions(servicebus: dict[str, Any]) -> None:
    retryable = {e["condition"]: e["retryable"] for e in servicebus["error_conditions"]}
    assert len(retryable) == len(servicebus["error_conditions"])
    assert {c for c, r in retryable.items() if r} == {
        "com.microsoft:server-busy",
        "com.microsoft:timeout",
        "com.microsoft:operation-cancelled",
        "amqp:internal-error",
        "amqp:connection:forced",
        "amqp:link:detach-forced",
        "amqp:link:transfer-limit-exceeded",
        "com.microsoft:container-close",
    }
    assert {c for c, r in retryable.items() if not r} == {
        "com.microsoft:message-lock-lost",
        "com.microsoft:session-lock-lost",
        "amqp:not-found",
        "amqp:unauthorized-access",
        "amqp:not-allowed",
        "amqp:link:message-size-exceeded",
        "amqp:resource-limit-exceeded",
        "com.microsoft:entity-disabled",
        "com.microsoft:argument-error",
        "com.microsoft:argument-out-of-range",
        "amqp:decode-error",
        "amqp:precondition-failed",
    }
    assert [r["condition"] for r in servicebus["rejection_conditions"]] == ["com.microsoft:dead-letter"]
    # The AMQP conditions it names are the spec's own.
    spec_conditions = {
        str(v)
        for cls in (
            definitions.AmqpErrorCondition,
            definitions.ConnectionErrorCondition,
            definitions.LinkErrorCondition,
        )
        for v in cls.CHOICES.values()
    }
    assert {c for c in retryable if c.startswith("amqp:")} <= spec_conditions


def test_servicebus_management_operations(servicebus: dict[str, Any]) -> None:
    ops = {op["name"]: op for op in servicebus["management"]["operations"]}
    expected = {
        "renew-lock": (["lock-tokens"], ["expirations"]),
        "peek-message": (["from-sequence-number", "message-count", "session-id"], ["messages"]),
        "schedule-message": (["messages"], ["sequence-numbers"]),
        "cancel-scheduled-message": (["sequence-numbers"], []),
        "receive-by-sequence-number": (["sequence-numbers", "receiver-settle-mode", "session-id"], ["messages"]),
        "update-disposition": (
            [
                "disposition-status",
                "lock-tokens",
                "deadletter-reason",
                "deadletter-description",
                "properties-to-modify",
                "session-id",
            ],
            [],
        ),
        "renew-session-lock": (["session-id"], ["expiration"]),
        "get-session-state": (["session-id"], ["session-state"]),
        "set-session-state": (["session-id", "session-state"], []),
    }
    assert set(ops) == {f"com.microsoft:{name}" for name in expected}
    for name, (request, response) in expected.items():
        op = ops[f"com.microsoft:{name}"]
        assert [k["key"] for k in op["request"]] == request, name
        assert [k["key"] for k in op["response"]] == response, name
    props = [p["name"] for p in servicebus["management"]["request_properties"]]
    assert props == ["operation", "com.microsoft:server-timeout", "associated-link-name"]


def test_servicebus_cbs_and_batch_format(servicebus: dict[str, Any]) -> None:
    cbs = servicebus["cbs"]
    assert cbs["node"] == "$cbs" and cbs["operation"] == "put-token"
    assert [p["name"] for p in cbs["request_properties"]] == ["operation", "type", "name", "expiration"]
    assert [p["name"] for p in cbs["response_properties"]] == ["status-code", "status-description"]
    assert [t["name"] for t in cbs["token_types"]] == ["servicebus.windows.net:sastoken", "jwt"]
    (batch,) = servicebus["message_formats"]
    assert batch["name"] == "batch" and batch["value"] == 0x80013700 == int(batch["hex"], 16)
