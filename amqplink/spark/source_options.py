"""The source's options (``spark.read`` / ``spark.readStream``): parsed once into a picklable
:class:`SourceConfig`, matched case-insensitively as the sink's are (:mod:`.options`).

The entity names a queue (``orders``), a subscription (``topic/Subscriptions/sub``), or the
dead-letter queue of either (``.../$DeadLetterQueue``); :func:`split_entity` takes it apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from amqplink.spark.options import (
    SinkOptionError,
    boolean,
    connection_string,
    entity_path_of,
    factory_name,
    namespace_of,
    non_negative_int,
    nonempty,
    parse_table,
    positive_float,
    positive_int,
    retry_mode,
)

__all__ = ["SOURCE_OPTION_NAMES", "STAGED_READS", "EntityPath", "SourceConfig", "parse_source_options", "split_entity"]

DEAD_LETTER = "$DeadLetterQueue"
STAGED_READS = ("auto", "file", "inline")
"""``stagedReads``: how a micro-batch's staged rows reach the executors (docs/spark.md#the-source):
``file``, each task opens the staged file (its path, length and sha256 in the partition), so the
executors must see the driver's ``checkpointLocation``; ``inline``, the rows travel as Arrow
bytes in the partitions; ``auto``, ``file`` when ``spark.master`` is ``local``/``local[...]``
(the executors are on the driver's machine), else ``inline``."""


@dataclass(frozen=True)
class EntityPath:
    """An entity to read: a queue, or a topic's subscription, or the dead-letter queue of either."""

    queue: str | None = None
    topic: str | None = None
    subscription: str | None = None
    dead_letter: bool = False

    @property
    def path(self) -> str:
        """As Service Bus writes it (``orders``, ``t/Subscriptions/s``, ``.../$DeadLetterQueue``)."""
        base = self.queue if self.queue is not None else f"{self.topic}/Subscriptions/{self.subscription}"
        return f"{base}/{DEAD_LETTER}" if self.dead_letter else str(base)


def split_entity(text: str) -> EntityPath:
    """``orders``, ``orders/$DeadLetterQueue``, ``t/Subscriptions/s``, ``t/Subscriptions/s/$DeadLetterQueue``."""
    parts = text.strip().strip("/").split("/")
    dead_letter = len(parts) > 1 and parts[-1].lower() == DEAD_LETTER.lower()
    if dead_letter:
        parts = parts[:-1]
    if len(parts) == 1 and parts[0]:
        return EntityPath(queue=parts[0], dead_letter=dead_letter)
    if len(parts) == 3 and parts[1].lower() == "subscriptions" and parts[0] and parts[2]:
        return EntityPath(topic=parts[0], subscription=parts[2], dead_letter=dead_letter)
    raise ValueError(
        f"{text!r} is not a queue ('orders'), a subscription ('topic/Subscriptions/sub') or the "
        "dead-letter queue of either ('.../$DeadLetterQueue')"
    )


@dataclass(frozen=True)
class SourceConfig:
    """Everything the source's readers need, parsed and checked on the driver; pickles (the
    connection string never appears in ``repr``)."""

    connection_string: str = field(default="", repr=False)
    entity: str | None = None
    sessions: bool = False
    """The entity requires sessions: receive (and peek) session by session."""
    checkpoint_location: str | None = None
    """Streaming: the directory where each micro-batch is written before Spark gets it."""
    max_messages_per_trigger: int = 10_000
    receive_wait: float = 1.0
    """Seconds a micro-batch waits for its first message."""
    max_concurrent_sessions: int = 8
    num_partitions: int | None = None
    """Spark partitions per micro-batch or batch read (default: by size)."""
    staged_reads: str = "auto"
    """Streaming: ``auto``, ``file`` or ``inline`` (:data:`STAGED_READS`)."""
    starting_sequence_number: int = 0
    ending_sequence_number: int | None = None
    """Batch reads: the sequence numbers to read, ``[start, end]`` (default: all there are)."""
    retry_total: int = 3
    retry_backoff_factor: float = 0.8
    retry_backoff_max: float = 120.0
    retry_mode: str = "exponential"
    operation_timeout: float = 60.0
    credential_factory: str | None = None
    """``module:callable`` called on each Python worker for a token credential (:mod:`.credentials`)."""
    fully_qualified_namespace: str | None = None

    @property
    def path(self) -> EntityPath:
        """The entity (the option, else the connection string's ``EntityPath``)."""
        name = self.entity or entity_path_of(self)
        if name is None:
            raise SinkOptionError(
                "no entity to read: give the 'entity' option (a queue, 'topic/Subscriptions/sub', or either's "
                "'/$DeadLetterQueue') or EntityPath in the connection string"
            )
        return split_entity(name)

    @property
    def namespace(self) -> str:
        """The namespace's host (no secret), for log lines and errors."""
        return namespace_of(self)


def _staged_reads(text: str) -> str:
    lowered = text.strip().lower()
    if lowered not in STAGED_READS:
        raise ValueError(f"must be one of {', '.join(STAGED_READS)}, not {text!r}")
    return lowered


def _entity(text: str) -> str:
    split_entity(text)
    return text.strip().strip("/")


_OPTIONS: dict[str, tuple[str, Any]] = {
    "connectionstring": ("connection_string", connection_string),
    "entity": ("entity", _entity),
    "sessions": ("sessions", boolean),
    "checkpointlocation": ("checkpoint_location", nonempty),
    "maxmessagespertrigger": ("max_messages_per_trigger", positive_int),
    "receivewait": ("receive_wait", positive_float),
    "maxconcurrentsessions": ("max_concurrent_sessions", positive_int),
    "numpartitions": ("num_partitions", positive_int),
    "stagedreads": ("staged_reads", _staged_reads),
    "startingsequencenumber": ("starting_sequence_number", non_negative_int),
    "endingsequencenumber": ("ending_sequence_number", non_negative_int),
    "retrytotal": ("retry_total", non_negative_int),
    "retrybackofffactor": ("retry_backoff_factor", positive_float),
    "retrybackoffmax": ("retry_backoff_max", positive_float),
    "retrymode": ("retry_mode", retry_mode),
    "operationtimeout": ("operation_timeout", positive_float),
    "credentialfactory": ("credential_factory", factory_name),
    "fullyqualifiednamespace": ("fully_qualified_namespace", nonempty),
}
SOURCE_OPTION_NAMES = (
    "connectionString", "entity", "sessions", "checkpointLocation", "maxMessagesPerTrigger", "receiveWait",
    "maxConcurrentSessions", "numPartitions", "stagedReads", "startingSequenceNumber", "endingSequenceNumber",
    "retryTotal", "retryBackoffFactor", "retryBackoffMax", "retryMode", "operationTimeout", "credentialFactory",
    "fullyQualifiedNamespace",
)  # fmt: skip
"""The source's option names as documented (matched case-insensitively)."""


def parse_source_options(options: Mapping[str, Any]) -> SourceConfig:
    """A :class:`SourceConfig` from Spark-style options; :class:`.options.SinkOptionError` names a
    missing, unknown or bad option (never a secret)."""
    source = dict(options)
    location = next((v for k, v in source.items() if str(k).lower() == "checkpointlocation"), None)
    source = {k: v for k, v in source.items() if str(k).lower() != "checkpointlocation"}
    values = parse_table(source, _OPTIONS, SOURCE_OPTION_NAMES, "source")
    if location is not None:
        values["checkpoint_location"] = nonempty(str(location))
    config = SourceConfig(**values)
    config.path  # noqa: B018  (raises naming the option when there is no entity)
    return config
