"""What the secondary namespace's backlog queues hold, and what strands messages silently.

A syphon moves only its own backlog queues, ``<label>/x-servicebus-transfer/<i>`` for ``i``
below its ``backlog_queue_count``, where ``label`` names its primary
(:func:`~.options.namespace_label`). Messages parked elsewhere are never moved, and nothing
says so: a queue of an index beyond the configured count (a client configured with more
queues), or one under another label (a client that named the primary differently, e.g.
``localhost`` and ``127.0.0.1`` for one embedded broker, or another primary). The inventory
lists every ``*/x-servicebus-transfer/*`` queue of the secondary through its management
API and names those (with messages) and why.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field

from amqplink.servicebus.paired.options import BACKLOG_SEGMENT, PairedNamespaceOptions

__all__ = ["Inventory", "Stranded", "classify", "take_inventory"]

_BACKLOG = re.compile(rf"(?P<label>.+)/{BACKLOG_SEGMENT}/(?P<index>\d+)\Z", re.IGNORECASE)


@dataclass(frozen=True)
class Stranded:
    """A backlog queue with messages that this syphon does not move."""

    queue: str
    messages: int
    why: str


@dataclass(frozen=True)
class Inventory:
    depths: dict[str, int | None] = field(default_factory=dict)
    """Each of this client's backlog queues -> its active messages (None: not there)."""
    stranded: tuple[Stranded, ...] = ()


def classify(counts: dict[str, int], names: Sequence[str], label: str) -> Inventory:
    """Sort the secondary's queues (name -> active messages) into this client's backlog
    queues and the stranded ones."""
    ours = {name.lower(): name for name in names}
    depths: dict[str, int | None] = dict.fromkeys(names)
    stranded = []
    for queue, count in sorted(counts.items()):
        if queue.lower() in ours:
            depths[ours[queue.lower()]] = count
            continue
        found = _BACKLOG.match(queue)
        if found is None or count == 0:
            continue
        other = found.group("label")
        if other.lower() == label.lower():
            why = (
                f"index {found.group('index')} is beyond backlog_queue_count={len(names)}: a client configured with"
                " more backlog queues parked there; run a syphon with that count (--backlog-queues)"
            )
        else:
            same_port = other.rsplit("-", 1)[-1] == label.rsplit("-", 1)[-1] and other[-1:].isdigit()
            hint = " (the same host by another name? e.g. localhost and 127.0.0.1)" if same_port else ""
            why = (
                f"parked for the primary {other!r}, and this syphon's primary is {label!r}{hint}; run a syphon"
                " with that primary's connection string"
            )
        stranded.append(Stranded(queue, count, why))
    return Inventory(depths, tuple(stranded))


def take_inventory(options: PairedNamespaceOptions, names: Sequence[str], label: str) -> Inventory:
    """List the secondary's queues (blocking: run it in a thread; each request bounded by
    ``management_timeout``) and :func:`classify` them. Errors are the admin client's
    (``HttpResponseError``, ``ServiceRequestError``)."""
    from amqplink.servicebus.connection_args import connection_arguments
    from amqplink.servicebus.management import ServiceBusAdministrationClient

    credential = connection_arguments(options.secondary_connection_string).credential
    netloc = urllib.parse.urlsplit(options.management_url).netloc
    with ServiceBusAdministrationClient(
        netloc, credential, connection_verify=options.connection_verify, timeout=options.management_timeout
    ) as admin:
        counts = {q.name: int(q.active_message_count or 0) for q in admin.list_queues_runtime_properties()}
    return classify(counts, names, label)
