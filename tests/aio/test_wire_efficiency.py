"""What the client puts on the wire: many deliveries per socket write, dispositions as ranges."""

from __future__ import annotations

from typing import Any

import amqplink
from amqplink import Message
from amqplink.broker import Broker
from amqplink.codec.decode import decode
from amqplink.engine.frames import FrameReader
from amqplink.protocol.definitions import Disposition, Transfer
from tests.receiving import receive_exactly

COUNT = 2000


class WireTap:
    """Records every socket write of a client connection; parses them as AMQP frames."""

    def __init__(self, conn: Any) -> None:
        transport = conn.protocol.transport
        self.writes: list[bytes] = []
        write = transport.write

        def tapped(data: bytes) -> None:
            self.writes.append(bytes(data))
            write(data)

        transport.write = tapped

    def performatives(self) -> list[Any]:
        reader = FrameReader(1 << 20)
        reader.feed(b"".join(self.writes))
        out = []
        while (frame := reader.read_frame()) is not None:
            body = frame[2]
            if len(body):
                out.append(decode(body)[0])
        return out


async def test_pipelined_transfers_share_socket_writes() -> None:
    # Credit for every message up front: no write waits for a top-up from the broker.
    async with Broker(credit_window=COUNT) as broker, await amqplink.connect(broker.url) as conn:
        sender = await conn.create_sender("wire", max_in_flight=COUNT)
        tap = WireTap(conn)
        for i in range(COUNT):
            await sender.send_nowait(Message(i.to_bytes(4, "big")))
        await sender.wait_settled()
        transfers = [p for p in tap.performatives() if type(p) is Transfer]
        assert len(transfers) == COUNT
        # Sends made in one loop turn leave in one write (coalesced flush).
        assert len(tap.writes) <= COUNT // 50, f"{len(tap.writes)} writes for {COUNT} transfers"
        assert len(broker.queue("wire")) == COUNT


async def test_accepting_a_batch_sends_dispositions_as_ranges() -> None:
    async with Broker() as broker, await amqplink.connect(broker.url) as conn:
        sender = await conn.create_sender("ranges")
        await sender.send_many(Message(i.to_bytes(4, "big")) for i in range(COUNT))
        receiver = await conn.create_receiver("ranges", prefetch=COUNT)
        taken = await receive_exactly(receiver, COUNT, accept=False, batch=COUNT)
        tap = WireTap(conn)
        await receiver.accept(*taken)
        dispositions = [p for p in tap.performatives() if type(p) is Disposition]
        covered = sum(int(d.last if d.last is not None else d.first) - int(d.first) + 1 for d in dispositions)
        assert covered == COUNT
        # rcv-settle-mode second (the embedded broker supports it): this side's disposition
        # leaves unsettled and the broker confirms (2.6.12).
        assert receiver.confirm
        assert all(not d.settled and type(d.state).__name__ == "Accepted" for d in dispositions)
        assert len(dispositions) <= 4, f"{len(dispositions)} disposition frames for {COUNT} accepts"
        assert len(broker.queue("ranges")) == 0
