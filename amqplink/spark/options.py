"""The sink's options: parsed once on the driver into a picklable :class:`SinkConfig`.

Spark hands a data source its options as a case-insensitive map (``dict(options)``
lower-cases the keys), so every name here is matched case-insensitively, as Spark's own
sources do. An unknown option is an error naming it (a misspelt ``maxInflight`` must not
be silently ignored). The connection strings are secrets: they are kept out of every
``repr``, error and log line (:func:`redact`), and checked by parsing only (nothing
connects on the driver).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from amqplink import AMQPLinkError
from amqplink.servicebus.connection_string import ConnectionStringError, parse_connection_string
from amqplink.servicebus.retry import RetryMode

__all__ = [
    "ID_MODES",
    "OPTION_NAMES",
    "SinkConfig",
    "SinkOptionError",
    "boolean",
    "connection_string",
    "entity_path_of",
    "factory_name",
    "namespace_of",
    "non_negative_float",
    "non_negative_int",
    "nonempty",
    "parse_options",
    "parse_table",
    "positive_float",
    "positive_int",
    "redact",
    "retry_mode",
]

ID_MODES = ("position", "content", "none")
"""``messageIdMode``, batch and streaming writes (:mod:`.columns` says what each makes)."""

_SECRET_VALUE = re.compile(r"(?i)(SharedAccessKey|SharedAccessSignature|sig)=[^;&\s]*")


_PER_PARTITION = frozenset(
    ("entity", "max_batch_bytes", "server_busy_timeout", "messages_per_second", "fail_on_error", "message_id_mode",
     "auto_partition_key")
)  # fmt: skip


class SinkOptionError(AMQPLinkError, ValueError):
    """A sink option is missing, unknown or has a bad value; the message names the option."""


@dataclass(frozen=True)
class SinkConfig:
    """Everything a partition needs to send, parsed and checked on the driver; pickles.

    The connection strings never appear in ``repr``. :attr:`cache_key` identifies the
    connection settings (a digest, so it holds no secret) for the per-worker cache.
    """

    connection_string: str = field(default="", repr=False)
    entity: str | None = None
    max_in_flight: int = 32
    """Batch transfers awaiting their outcome at once, per partition."""
    max_batch_bytes: int = 256 * 1024
    """Upper bound of one batch transfer (further bounded by the entity's max-message-size)."""
    send_timeout: float = 60.0
    """Seconds one batch may take, its retries included (the client's operation timeout)."""
    retry_total: int = 3
    retry_backoff_factor: float = 0.8
    retry_backoff_max: float = 120.0
    retry_mode: str = "exponential"
    server_busy_timeout: float = 300.0
    """Seconds a batch refused with server-busy keeps backing off before the task fails."""
    messages_per_second: float | None = None
    """Per task (partition) throttle; None: as fast as the broker acknowledges."""
    fail_on_error: bool = True
    message_id_mode: str = "position"
    auto_partition_key: bool = True
    """Give rows without ``partition_key``/``session_id`` a key made from their id (see :mod:`.columns`)."""
    idle_timeout: float = 60.0
    """Seconds a cached connection may stay unused before it is closed."""
    paired_connection_string: str | None = field(default=None, repr=False)
    backlog_queue_count: int = 10
    failover_interval: float = 10.0
    """Seconds without a successful send before an entity fails over (the paired client's default)."""
    ping_primary_interval: float = 60.0
    enable_syphon: bool = False
    """Run the syphon in the executors too (default: no; run it in one long-lived process)."""
    management_endpoint: str | None = None
    connection_verify: str | bool | None = None
    """The secondary's management API: a CA bundle path, or False to skip the certificate check."""
    credential_factory: str | None = None
    """``module:callable`` called on each Python worker for a token credential (:mod:`.credentials`)."""
    fully_qualified_namespace: str | None = None
    """The namespace, when a credential factory is given without a connection string."""

    @property
    def cache_key(self) -> str:
        """A digest of the settings a connection and its senders are made with (secrets
        included, so it reveals none); per-partition settings (entity, throttle, ids) are not."""
        text = "\0".join(repr(getattr(self, f.name)) for f in fields(self) if f.name not in _PER_PARTITION)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @property
    def namespace(self) -> str:
        """The primary namespace's host (no secret), for log lines and errors."""
        return namespace_of(self)

    @property
    def paired(self) -> bool:
        """True when a paired (secondary) namespace takes the sends the primary cannot."""
        return self.paired_connection_string is not None


def namespace_of(config: Any) -> str:
    """The namespace of a sink's or source's config: its connection string's endpoint, else
    its ``fully_qualified_namespace``."""
    if config.connection_string:
        return str(parse_connection_string(config.connection_string).fully_qualified_namespace)
    return str(config.fully_qualified_namespace)


def entity_path_of(config: Any) -> str | None:
    """The ``EntityPath`` of a config's connection string (None without one)."""
    if not config.connection_string:
        return None
    path = parse_connection_string(config.connection_string).entity_path
    return None if path is None else str(path)


def factory_name(text: str) -> str:
    """A ``credentialFactory``: ``module:callable`` (checked here, imported on each worker)."""
    from amqplink.spark.credentials import check_factory_name

    return check_factory_name(text)


def positive_int(text: str) -> int:
    """An option that counts something: an integer, at least 1."""
    value = int(text)
    if value < 1:
        raise ValueError(f"must be at least 1, not {value}")
    return value


def non_negative_int(text: str) -> int:
    """An option that may be 0 (off): an integer, 0 or more."""
    value = int(text)
    if value < 0:
        raise ValueError(f"must be 0 or more, not {value}")
    return value


def positive_float(text: str) -> float:
    """A duration or rate that must be more than 0."""
    value = float(text)
    if not value > 0:
        raise ValueError(f"must be more than 0, not {text}")
    return value


def non_negative_float(text: str) -> float:
    """A duration that may be 0 (off): 0 or more (NaN refused)."""
    value = float(text)
    if not value >= 0:
        raise ValueError(f"must be 0 or more, not {text}")
    return value


def boolean(text: str) -> bool:
    """``true``/``1``/``yes`` or ``false``/``0``/``no``, any case; anything else is refused."""
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(f"must be true or false, not {text!r}")


def retry_mode(text: str) -> str:
    """The client's ``retry_mode``: ``exponential`` or ``fixed``, any case."""
    return RetryMode(text.strip().lower()).value


def _id_mode(text: str) -> str:
    lowered = text.strip().lower()
    if lowered not in ID_MODES:
        raise ValueError(f"must be one of {', '.join(ID_MODES)}, not {text!r}")
    return lowered


def _verify(text: str) -> str | bool:
    lowered = text.strip().lower()
    if lowered in ("false", "true"):
        return lowered == "true"
    return nonempty(text)


def nonempty(text: str) -> str:
    """Text with something in it besides blanks, stripped."""
    if not text.strip():
        raise ValueError("must not be empty")
    return text.strip()


def connection_string(text: str) -> str:
    """A Service Bus connection string that parses; the error for one that does not keeps
    its keys out (:func:`redact`)."""
    try:
        parse_connection_string(text)
    except ConnectionStringError as exc:
        raise ValueError(redact(str(exc))) from None
    return text


_OPTIONS: dict[str, tuple[str, Any]] = {  # option name, lower case -> (field, converter)
    "connectionstring": ("connection_string", connection_string),
    "entity": ("entity", nonempty),
    "maxinflight": ("max_in_flight", positive_int),
    "maxbatchbytes": ("max_batch_bytes", positive_int),
    "sendtimeout": ("send_timeout", positive_float),
    "retrytotal": ("retry_total", non_negative_int),
    "retrybackofffactor": ("retry_backoff_factor", non_negative_float),
    "retrybackoffmax": ("retry_backoff_max", non_negative_float),
    "retrymode": ("retry_mode", retry_mode),
    "serverbusytimeout": ("server_busy_timeout", positive_float),
    "messagespersecond": ("messages_per_second", positive_float),
    "failonerror": ("fail_on_error", boolean),
    "messageidmode": ("message_id_mode", _id_mode),
    "autopartitionkey": ("auto_partition_key", boolean),
    "connectionidletimeout": ("idle_timeout", positive_float),
    "pairedconnectionstring": ("paired_connection_string", connection_string),
    "backlogqueuecount": ("backlog_queue_count", positive_int),
    "failoverinterval": ("failover_interval", non_negative_float),
    "pingprimaryinterval": ("ping_primary_interval", positive_float),
    "enablesyphon": ("enable_syphon", boolean),
    "managementendpoint": ("management_endpoint", nonempty),
    "connectionverify": ("connection_verify", _verify),
    "credentialfactory": ("credential_factory", factory_name),
    "fullyqualifiednamespace": ("fully_qualified_namespace", nonempty),
}
OPTION_NAMES = (
    "connectionString", "entity", "maxInFlight", "maxBatchBytes", "sendTimeout", "retryTotal",
    "retryBackoffFactor", "retryBackoffMax", "retryMode", "serverBusyTimeout", "messagesPerSecond", "failOnError",
    "messageIdMode", "autoPartitionKey", "connectionIdleTimeout", "pairedConnectionString", "backlogQueueCount",
    "failoverInterval", "pingPrimaryInterval", "enableSyphon", "managementEndpoint", "connectionVerify",
    "credentialFactory", "fullyQualifiedNamespace",
)  # fmt: skip
"""The option names as documented (matched case-insensitively)."""
_SPARK_OPTIONS = frozenset(("path", "checkpointlocation", "__partition_columns"))
# (a streaming source takes ``checkpointLocation`` itself: its own table has it)
"""Options Spark itself passes to every sink; not ours, not an error."""


def parse_options(options: Mapping[str, Any]) -> SinkConfig:
    """A :class:`SinkConfig` from Spark-style options (keys case-insensitive, values as text).

    Raises :class:`SinkOptionError` naming the option for a missing ``connectionString``,
    an unknown option or a bad value; the message never holds a secret.
    """
    return SinkConfig(**parse_table(options, _OPTIONS, OPTION_NAMES, "sink"))


def parse_table(
    options: Mapping[str, Any], table: Mapping[str, tuple[str, Any]], names: tuple[str, ...], kind: str
) -> dict[str, Any]:
    """``options`` converted by ``table`` (lower-cased option name -> (field, converter)) into
    keyword arguments; ``names``: the option names as documented, for errors; ``kind``: "sink" or
    "source", for errors. Spark's own options are skipped; ``connectionString`` is required."""
    values: dict[str, Any] = {}
    for key, raw in options.items():
        lowered = str(key).lower()
        if lowered in _SPARK_OPTIONS or lowered.startswith("spark."):
            continue
        known = table.get(lowered)
        if known is None:
            raise SinkOptionError(
                f"unknown option {key!r} for the servicebus {kind}; the options are: {', '.join(names)}"
            )
        name, convert = known
        if raw is None:
            continue
        try:
            values[name] = convert(str(raw))
        except ValueError as exc:
            documented = next((n for n in names if n.lower() == lowered), lowered)
            raise SinkOptionError(f"option {documented}: {redact(str(exc))}") from None
    if "connection_string" not in values and "credential_factory" not in values:
        raise SinkOptionError(
            "option connectionString is required: the namespace's connection string "
            "(Endpoint=sb://...;SharedAccessKeyName=...;SharedAccessKey=...), or credentialFactory "
            "(e.g. azure.identity:DefaultAzureCredential) with fullyQualifiedNamespace"
        )
    if "connection_string" not in values and "fully_qualified_namespace" not in values:
        raise SinkOptionError(
            "option fullyQualifiedNamespace is required with credentialFactory and no connectionString "
            "(<name>.servicebus.windows.net)"
        )
    return values


def redact(text: str) -> str:
    """``text`` with every SAS key, signature and ``sig=`` value replaced by ``***``."""
    return _SECRET_VALUE.sub(lambda match: f"{match.group(1)}=***", text)
