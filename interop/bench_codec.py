"""Codec benchmark: encode + decode a Transfer frame carrying a 1 KiB message.

Runs amqplink, qpid-proton's C codec (``proton.Data`` / ``proton.Message``) and,
when installed, azure-servicebus's pure-Python ``_pyamqp`` codec side by side in one
process, on the same message (header, message annotations, properties, application
properties, 1 KiB data section), and prints the ratios. Not a test: a measurement.

    python interop/bench_codec.py [--count N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

BODY = bytes(range(256)) * 4  # 1 KiB
TAG = b"\x00\x00\x00\x00\x00\x00\x00\x07"
MESSAGE_ID = str(uuid.UUID(int=0x1234))
APP_PROPS = {"tenant": "contoso", "attempt": 3, "priority": "high", "region": "westeurope"}
CREATION = 1_700_000_000_000
_FRAME_HEADER = struct.Struct(">IBBH")


def amqplink_case() -> tuple[Callable[[], bytes], Callable[[bytes], Any]]:
    from amqplink.codec.decode import decode_sequence
    from amqplink.codec.types import Symbol, Timestamp, UInt
    from amqplink.engine.frames import FRAME_TYPE_AMQP, FrameReader, write_frame
    from amqplink.engine.hot_decode import decode_performative
    from amqplink.protocol.definitions import (
        ApplicationProperties,
        Data,
        Header,
        MessageAnnotations,
        Properties,
        Transfer,
    )

    annotations = {Symbol("x-opt-partition-key"): "pk-1"}
    content_type = Symbol("application/octet-stream")

    def encode_frame() -> bytes:
        payload = bytearray()
        Header(durable=True, ttl=UInt(60_000))._amqp_encode(payload)
        MessageAnnotations(annotations)._amqp_encode(payload)
        Properties(
            message_id=MESSAGE_ID,
            to="queue-1",
            subject="order",
            content_type=content_type,
            creation_time=Timestamp(CREATION),
            group_id="session-1",
        )._amqp_encode(payload)
        ApplicationProperties(APP_PROPS)._amqp_encode(payload)
        Data(BODY)._amqp_encode(payload)
        out = bytearray()
        transfer = Transfer(
            handle=UInt(0), delivery_id=UInt(7), delivery_tag=TAG, message_format=UInt(0), settled=False
        )
        write_frame(out, FRAME_TYPE_AMQP, 0, transfer, payload)
        return bytes(out)

    def decode_frame(frame: bytes) -> Any:
        reader = FrameReader(1 << 20)
        reader.feed(frame)
        got = reader.read_frame()
        assert got is not None
        body = got[2]
        transfer, offset = decode_performative(body)  # as the engine reads frames
        sections = decode_sequence(body[offset:])
        return transfer, sections

    return encode_frame, decode_frame


def proton_case() -> tuple[Callable[[], bytes], Callable[[bytes], Any]]:
    from proton import Data, Message, symbol, ulong

    def encode_frame() -> bytes:
        msg = Message(inferred=True)
        msg.body = BODY
        msg.durable = True
        msg.ttl = 60.0
        msg.annotations = {symbol("x-opt-partition-key"): "pk-1"}
        msg.id = MESSAGE_ID
        msg.address = "queue-1"
        msg.subject = "order"
        msg.content_type = "application/octet-stream"
        msg.creation_time = CREATION / 1000
        msg.group_id = "session-1"
        msg.properties = dict(APP_PROPS)
        payload = msg.encode()
        d = Data()
        d.put_described()
        d.enter()
        d.put_ulong(ulong(0x14))
        d.put_list()
        d.enter()
        d.put_uint(0)
        d.put_uint(7)
        d.put_binary(TAG)
        d.put_uint(0)
        d.put_bool(False)
        d.exit()
        d.exit()
        performative = d.encode()
        size = 8 + len(performative) + len(payload)
        return _FRAME_HEADER.pack(size, 2, 0, 0) + performative + payload

    def decode_frame(frame: bytes) -> Any:
        size, doff, _, _ = _FRAME_HEADER.unpack_from(frame)
        body = frame[doff * 4 : size]
        d = Data()
        used = d.decode(body)
        transfer = d.get_object()
        msg = Message()
        msg.decode(body[used:])
        return transfer, msg

    return encode_frame, decode_frame


def pyamqp_case() -> tuple[Callable[[], bytes], Callable[[bytes], Any]]:
    from azure.servicebus._pyamqp._decode import decode_frame as pa_decode_frame
    from azure.servicebus._pyamqp._decode import decode_payload
    from azure.servicebus._pyamqp._encode import encode_frame as pa_encode_frame
    from azure.servicebus._pyamqp._encode import encode_payload
    from azure.servicebus._pyamqp.message import Header, Message, Properties
    from azure.servicebus._pyamqp.performatives import TransferFrame

    def encode_frame() -> bytes:
        msg = Message(
            header=Header(durable=True, ttl=60_000),
            message_annotations={b"x-opt-partition-key": "pk-1"},
            properties=Properties(
                message_id=MESSAGE_ID,
                to="queue-1",
                subject="order",
                content_type="application/octet-stream",
                creation_time=CREATION,
                group_id="session-1",
            ),
            application_properties=dict(APP_PROPS),
            data=[BODY],  # a list of data sections, as the SDK builds it
        )
        payload = bytearray()
        encode_payload(payload, msg)
        # _pyamqp's frame header is 6 bytes here: its transport adds the channel on write
        header, body = pa_encode_frame(
            TransferFrame(
                handle=0, delivery_id=7, delivery_tag=TAG, message_format=0, settled=False, more=False, payload=payload
            )
        )
        return bytes(header) + bytes(body or b"")

    def decode_frame(frame: bytes) -> Any:
        view = memoryview(frame)
        _, fields = pa_decode_frame(view[6:])
        return fields, decode_payload(fields[-1])

    return encode_frame, decode_frame


def measure(encode: Callable[[], bytes], decode: Callable[[bytes], Any], count: int, rounds: int) -> dict[str, float]:
    frame = encode()
    decode(frame)
    enc: list[float] = []
    dec: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(count):
            encode()
        t1 = time.perf_counter()
        for _ in range(count):
            decode(frame)
        t2 = time.perf_counter()
        enc.append((t1 - t0) / count)
        dec.append((t2 - t1) / count)
    e = statistics.median(enc)
    d = statistics.median(dec)
    return {"encode_us": e * 1e6, "decode_us": d * 1e6, "total_us": (e + d) * 1e6, "frame_bytes": len(frame)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000, help="frames per round (default 20000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the median is reported (default 5)")
    args = parser.parse_args(argv)

    cases: dict[str, Callable[[], tuple[Callable[[], bytes], Callable[[bytes], Any]]]] = {
        "amqplink": amqplink_case,
        "proton (C)": proton_case,
        "_pyamqp": pyamqp_case,
    }
    results: dict[str, dict[str, float]] = {}
    for name, factory in cases.items():
        try:
            encode, decode = factory()
        except ImportError as exc:
            print(f"{name}: not installed ({exc})", file=sys.stderr)
            continue
        results[name] = measure(encode, decode, args.count, args.rounds)

    base = results["amqplink"]
    print(f"Transfer frame + 1 KiB message, {args.count} x {args.rounds} rounds (median), "
          f"Python {sys.version.split()[0]}")
    print(f"{'codec':<12} {'frame B':>8} {'encode us':>10} {'decode us':>10} {'total us':>10} {'amqplink is':>14}")
    for name, r in results.items():
        ratio = r["total_us"] / base["total_us"]
        speed = "-" if name == "amqplink" else f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
        print(
            f"{name:<12} {int(r['frame_bytes']):>8} {r['encode_us']:>10.2f} {r['decode_us']:>10.2f}"
            f" {r['total_us']:>10.2f} {speed:>14}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
