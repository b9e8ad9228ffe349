"""Metrics an operator can scrape: the paired namespaces, the local queue and active
replication, through the OpenTelemetry metrics API (the Azure SDK ecosystem's choice), an
optional dependency (``pip install amqplink[otel]``).

One table (:data:`METRICS`) says each metric's name, kind, unit and how it is read from
the state objects (``client.paired_state``, ``client.local_queue_state``, a replication
sender's ``counters`` and ``breakers``); :func:`readings` reads them all as plain values
(what ``amqplink syphon`` and ``amqplink local-queue`` print as JSON) and :func:`instrument`
registers the same as observable instruments, read when the reader collects (nothing is
counted on the send path). Without ``opentelemetry-api`` installed, :func:`instrument`
does nothing and returns None; the module imports it only when called.

    from amqplink.servicebus.metrics import instrument
    instrument(client)                       # the global MeterProvider
    instrument(client, replication={"sales": sender}, meter_provider=provider)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from amqplink.servicebus.localqueue.queue import LocalQueueState
from amqplink.servicebus.paired.pairing import PairedState

__all__ = ["METER_NAME", "METRICS", "Metric", "Sources", "instrument", "readings", "sources_of"]

METER_NAME = "amqplink.servicebus"

Reading = tuple[float, dict[str, str]]
"""One observation: its value and attributes."""


def _nothing() -> None:
    """Nothing to read (a source that is not there)."""


@dataclass(frozen=True)
class Sources:
    """Where the metrics are read from (each a callable: read at collection time)."""

    paired: Callable[[], PairedState | None] = _nothing
    """The paired client's state (None: not paired)."""
    local_queue: Callable[[], LocalQueueState | None] = _nothing
    """The local queue's state (None: none)."""
    replication: Mapping[str, Any] = field(default_factory=dict)
    """Name -> an ``ActiveReplicationSender`` or ``PassiveReplicationSender``."""
    backlog_depths: Callable[[], Mapping[str, int | None]] = dict
    """Backlog queue -> its messages (the syphon's inventory; empty: not known)."""
    clock: Callable[[], float] = time.time


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str
    """``gauge`` or ``counter`` (monotonic: an observable counter)."""
    unit: str
    description: str
    read: Callable[[Sources], Iterable[Reading]]


def _paired(read: Callable[[PairedState], float | None]) -> Callable[[Sources], Iterator[Reading]]:
    def readings(s: Sources) -> Iterator[Reading]:
        state = s.paired()
        if state is not None and (value := read(state)) is not None:
            yield float(value), {}

    return readings


def _local(read: Callable[[LocalQueueState], float | None]) -> Callable[[Sources], Iterator[Reading]]:
    def readings(s: Sources) -> Iterator[Reading]:
        state = s.local_queue()
        if state is not None and (value := read(state)) is not None:
            yield float(value), {"directory": state.directory}

    return readings


def _counter(name: str) -> Callable[[Sources], Iterator[Reading]]:
    def readings(s: Sources) -> Iterator[Reading]:
        for sender_name, sender in s.replication.items():
            yield float(getattr(sender.counters, name)), {"sender": sender_name}

    return readings


def _per_queue(s: Sources) -> Iterator[Reading]:
    for queue, depth in s.backlog_depths().items():
        if depth is not None:
            yield float(depth), {"queue": queue}


def _oldest_parked(s: Sources) -> Iterator[Reading]:
    state = s.paired()
    if state is not None:
        now = s.clock()
        for queue, parked_at in state.syphon_oldest.items():
            yield max(0.0, now - parked_at), {"queue": queue}


def _moved(s: Sources) -> Iterator[Reading]:
    state = s.paired()
    if state is not None:
        for queue, moved in state.syphon_moved.items():
            yield float(moved), {"queue": queue}


def _last_error(s: Sources) -> Iterator[Reading]:
    """1 with the error's text as an attribute (an "info" reading): an operator sees what it was."""
    paired, local = s.paired(), s.local_queue()
    if paired is not None and paired.last_error:
        yield 1.0, {"source": "paired", "error": paired.last_error[:300]}
    if paired is not None and paired.backlog_error:
        yield 1.0, {"source": "backlog-check", "error": paired.backlog_error[:300]}
    if local is not None and local.last_error:
        yield 1.0, {"source": "local-queue", "error": local.last_error[:300]}


def _local_entities(s: Sources) -> Iterator[Reading]:
    state = s.local_queue()
    if state is not None:
        for entity, backlog in state.entities.items():
            yield float(backlog.depth), {"directory": state.directory, "entity": entity}


def _breakers(s: Sources) -> Iterator[Reading]:
    for sender_name, sender in s.replication.items():
        for index, breaker in enumerate(getattr(sender, "breakers", ())):
            yield (1.0 if breaker.state == "open" else 0.0), {"sender": sender_name, "namespace": str(index)}


METRICS: tuple[Metric, ...] = (
    Metric("amqplink.paired.backlog.depth", "gauge", "{message}", "messages in each backlog queue", _per_queue),
    Metric("amqplink.paired.backlog.oldest_age", "gauge", "s",
           "age of the oldest parked message the syphon last received, per backlog queue", _oldest_parked),
    Metric("amqplink.paired.backlog.in_rotation", "gauge", "{queue}", "backlog queues in the rotation",
           _paired(lambda p: len(p.in_rotation))),
    Metric("amqplink.paired.failed_over", "gauge", "{entity}", "entities failed over now",
           _paired(lambda p: len(p.failed_over))),
    Metric("amqplink.paired.failovers", "counter", "{failover}", "failovers engaged", _paired(lambda p: p.failovers)),
    Metric("amqplink.paired.failbacks", "counter", "{failback}", "failbacks (a ping accepted)",
           _paired(lambda p: p.failbacks)),
    Metric("amqplink.paired.last_failover_time", "gauge", "s", "Unix time of the last failover",
           _paired(lambda p: p.last_failover_at)),
    Metric("amqplink.paired.last_failback_time", "gauge", "s", "Unix time of the last failback",
           _paired(lambda p: p.last_failback_at)),
    Metric("amqplink.paired.parked", "counter", "{message}", "messages sent to a backlog queue",
           _paired(lambda p: p.parked)),
    Metric("amqplink.paired.syphoned", "counter", "{message}", "parked messages moved back by this process's syphon",
           _paired(lambda p: p.syphoned)),
    Metric("amqplink.paired.syphon.moved", "counter", "{message}", "messages the syphon moved, per backlog queue",
           _moved),
    Metric("amqplink.local_queue.depth", "gauge", "{message}", "messages stored locally, not yet forwarded",
           _local(lambda q: q.depth)),
    Metric("amqplink.local_queue.entity.depth", "gauge", "{message}", "messages stored locally, per entity",
           _local_entities),
    Metric("amqplink.local_queue.bytes", "gauge", "By", "bytes the stored messages take", _local(lambda q: q.bytes)),
    Metric("amqplink.local_queue.oldest_age", "gauge", "s", "age of the oldest stored message",
           _local(lambda q: q.oldest_age)),
    Metric("amqplink.local_queue.stored", "counter", "{message}", "messages stored locally by this client",
           _local(lambda q: q.stored)),
    Metric("amqplink.local_queue.forwarded", "counter", "{message}", "stored messages forwarded (and removed)",
           _local(lambda q: q.forwarded)),
    Metric("amqplink.local_queue.refused_full", "counter", "{message}", "messages refused: the local queue was full",
           _local(lambda q: q.refused_full)),
    Metric("amqplink.replication.sends", "counter", "{send}", "replication sends that succeeded", _counter("sends")),
    Metric("amqplink.replication.sent_to_one", "counter", "{send}", "active sends only one namespace took",
           _counter("sent_to_one")),
    Metric("amqplink.replication.failed", "counter", "{send}", "sends no namespace took", _counter("failed")),
    Metric("amqplink.replication.breaker.open", "gauge", "1", "1 while a namespace's circuit breaker is open",
           _breakers),
    Metric("amqplink.last_error", "gauge", "1", "the last error (its text in the attribute error)", _last_error),
)  # fmt: skip
"""Every metric, once: its JSON (:func:`readings`) and its instrument (:func:`instrument`) read the same."""


def sources_of(client: Any, **more: Any) -> Sources:
    """The sources of a ``ServiceBusClient`` (asyncio or blocking): its paired and local queue
    states; ``more``: ``replication``, ``backlog_depths``, ``clock``."""
    return Sources(paired=lambda: client.paired_state, local_queue=lambda: client.local_queue_state, **more)


def readings(sources: Sources) -> dict[str, list[dict[str, Any]]]:
    """Every metric with a value now: name -> ``[{"value": v, **attributes}, ...]`` (JSON)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for metric in METRICS:
        values = [{"value": round(value, 3), **attributes} for value, attributes in metric.read(sources)]
        if values:
            out[metric.name] = values
    return out


def instrument(client: Any = None, *, meter_provider: Any = None, sources: Sources | None = None, **more: Any) -> Any:
    """Register :data:`METRICS` as observable instruments of the meter ``amqplink.servicebus``
    (of ``meter_provider``, default the global one), read from ``client`` (or ``sources``).
    The meter, or None when ``opentelemetry-api`` is not installed (nothing is registered)."""
    try:
        from opentelemetry import metrics as otel
    except ImportError:
        return None
    if sources is None:
        sources = sources_of(client, **more)
    from amqplink import __version__

    meter = (meter_provider or otel.get_meter_provider()).get_meter(METER_NAME, __version__)
    for metric in METRICS:
        callback = _callback(otel, metric, sources)
        if metric.kind == "counter":
            meter.create_observable_counter(metric.name, [callback], unit=metric.unit, description=metric.description)
        else:
            meter.create_observable_gauge(metric.name, [callback], unit=metric.unit, description=metric.description)
    return meter


def _callback(otel: Any, metric: Metric, sources: Sources) -> Callable[[Any], Iterator[Any]]:
    def observe(_options: Any) -> Iterator[Any]:
        for value, attributes in metric.read(sources):
            yield otel.Observation(value, attributes)

    return observe
