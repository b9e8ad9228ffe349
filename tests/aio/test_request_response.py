"""Request/response over a link pair, against the in-test responder (tests/responder.py)."""

from __future__ import annotations

import asyncio

import pytest

from amqplink import Message
from amqplink.aio import ConnectionClosedError, LinkDetachedError, MessageRejected, connect
from amqplink.aio.request_response import RequestResponseLink, RequestTimeout
from amqplink.engine.link import SND_UNSETTLED
from amqplink.protocol.definitions import Error
from tests.responder import Responder


def hold(node: str, request: Message) -> None:
    return None


async def test_request_gets_its_response_and_the_wire_shape_is_right() -> None:
    async with Responder() as responder, await connect(responder.url) as conn:
        pair = await RequestResponseLink.open(conn, "$cbs")
        request = Message("token", application_properties={"operation": "put-token"})
        response = await pair.request(request, timeout=5)
        assert response.body == "token" and response.application_properties == {"status-code": 200}
        assert response.correlation_id == request.message_id is not None
        # the receiver: source = the node, target = a unique reply address = the requests' reply-to
        [(node, seen)] = responder.requests
        assert node == "$cbs" and seen.reply_to == pair.reply_to == request.reply_to
        reply_link = responder.reply_links[pair.reply_to]
        assert reply_link.remote_attach.source.address == "$cbs"
        [request_link] = responder.request_links
        assert request_link.remote_attach.snd_settle_mode == SND_UNSETTLED
        other = await RequestResponseLink.open(conn, "$cbs")
        assert other.reply_to != pair.reply_to
        await pair.close()
        await other.close()


async def test_responses_out_of_order_reach_their_own_requests() -> None:
    async with Responder(hold) as responder, await connect(responder.url) as conn:
        pair = await RequestResponseLink.open(conn, "q/$management")
        tasks = [asyncio.ensure_future(pair.request(Message(i), timeout=5)) for i in range(5)]
        await responder.wait_until(lambda: len(responder.held) == 5)
        for _, request in reversed(list(responder.held)):
            responder.answer(request, Message(request.body * 10))
        assert [r.body for r in await asyncio.gather(*tasks)] == [0, 10, 20, 30, 40]
        assert pair.pending == 0


async def test_outstanding_requests_are_bounded() -> None:
    async with Responder(hold) as responder, await connect(responder.url) as conn:
        pair = await RequestResponseLink.open(conn, "n", max_outstanding=2)
        tasks = [asyncio.ensure_future(pair.request(Message(i), timeout=5)) for i in range(3)]
        await responder.wait_until(lambda: len(responder.held) == 2)
        # a barrier: a round trip on another pair of the same connection is answered only
        # after the responder has read every byte written before it
        responder.handler = lambda node, request: Message("pong") if node == "barrier" else None
        barrier = await RequestResponseLink.open(conn, "barrier")
        assert (await barrier.request(Message("ping"), timeout=5)).body == "pong"
        assert [r.body for n, r in responder.held if n == "n"] == [0, 1]
        assert pair.pending == 2 and not tasks[2].done()
        responder.answer(responder.held[0][1], Message("first"))
        await responder.wait_until(lambda: len([1 for n, _ in responder.held if n == "n"]) == 2)
        for _, request in [h for h in responder.held if h[0] == "n"]:
            responder.answer(request, Message("rest"))
        assert [r.body for r in await asyncio.gather(*tasks)] == ["first", "rest", "rest"]


async def test_timeout_then_late_answer_is_dropped_and_the_pair_still_works() -> None:
    async with Responder(hold) as responder, await connect(responder.url) as conn:
        pair = await RequestResponseLink.open(conn, "n")
        with pytest.raises(RequestTimeout) as info:
            await pair.request(Message("slow"), timeout=0.05)
        assert isinstance(info.value, TimeoutError) and "'n'" in str(info.value)
        assert pair.pending == 0
        [(_, late)] = responder.held
        responder.answer(late, Message("too late"))
        responder.handler = lambda node, request: Message("fresh")
        assert (await pair.request(Message("again"), timeout=5)).body == "fresh"
        assert not pair.closed


async def test_a_rejected_request_fails_at_once_with_the_condition() -> None:
    async with Responder(hold) as responder, await connect(responder.url) as conn:
        responder.reject["n"] = Error(condition="amqp:not-allowed", description="no such operation")
        pair = await RequestResponseLink.open(conn, "n")
        with pytest.raises(MessageRejected) as info:
            await pair.request(Message("x"), timeout=30)
        assert info.value.condition == "amqp:not-allowed"
        assert pair.pending == 0 and not pair.closed


async def test_connection_drop_fails_every_waiter_at_once() -> None:
    async with Responder(hold) as responder, await connect(responder.url) as conn:
        pair = await RequestResponseLink.open(conn, "n")
        tasks = [asyncio.ensure_future(pair.request(Message(i), timeout=60)) for i in range(3)]
        await responder.wait_until(lambda: len(responder.held) == 3)
        responder.drop_connections()
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
        assert all(isinstance(r, ConnectionClosedError) for r in results)
        assert pair.closed and pair.pending == 0
        with pytest.raises(ConnectionClosedError):
            await pair.request(Message("after"))


async def test_reply_link_detached_by_peer_fails_waiters_and_closes_the_request_link() -> None:
    async with Responder(hold) as responder, await connect(responder.url) as conn:
        pair = await RequestResponseLink.open(conn, "n")
        task = asyncio.ensure_future(pair.request(Message(1), timeout=60))
        await responder.wait_until(lambda: len(responder.held) == 1)
        responder.detach_reply_links(Error(condition="amqp:link:detach-forced", description="idle"))
        with pytest.raises(LinkDetachedError) as info:
            await asyncio.wait_for(task, 5)
        assert info.value.condition == "amqp:link:detach-forced"
        [request_link] = responder.request_links
        await responder.wait_until(lambda: request_link in responder.detached)
        assert pair.closed and not conn.closed


async def test_close_fails_waiters_and_detaches_both_links() -> None:
    async with Responder(hold) as responder, await connect(responder.url) as conn:
        async with await RequestResponseLink.open(conn, "n") as pair:
            task = asyncio.ensure_future(pair.request(Message(1), timeout=60))
            await responder.wait_until(lambda: len(responder.held) == 1)
        with pytest.raises(LinkDetachedError, match="closed by the application"):
            await task
        await responder.wait_until(lambda: len(responder.detached) == 2)


async def test_duplicate_message_id_is_refused() -> None:
    async with Responder(hold) as responder, await connect(responder.url) as conn:
        pair = await RequestResponseLink.open(conn, "n")
        first = asyncio.ensure_future(pair.request(Message(1, message_id="same"), timeout=5))
        await responder.wait_until(lambda: len(responder.held) == 1)
        with pytest.raises(ValueError, match="already waiting"):
            await pair.request(Message(2, message_id="same"))
        responder.answer(responder.held[0][1], Message("ok"))
        assert (await first).body == "ok"


async def test_open_validates_and_cleans_up_a_half_open_pair() -> None:
    async with Responder() as responder, await connect(responder.url) as conn:
        with pytest.raises(ValueError):
            await RequestResponseLink.open(conn, "n", max_outstanding=0)
        responder.refuse_replies_from.add("n")
        with pytest.raises(LinkDetachedError) as info:
            await RequestResponseLink.open(conn, "n")
        assert info.value.condition == "amqp:not-found"
        [request_link] = responder.request_links
        await responder.wait_until(lambda: request_link in responder.detached)
