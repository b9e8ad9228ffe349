"""The official management samples' scenarios, written once, run with any admin client.

The azure-servicebus samples ``mgmt_queue``, ``mgmt_topic``, ``mgmt_subscription``,
``mgmt_rule`` and ``mgmt_namespace`` (sync and async) create, get, update (by property and
by keyword), list, read the runtime properties of and delete each kind of entity. Each
scenario here is a generator that yields the calls it makes (``Step``) and receives their
results; :func:`run_sync` and :func:`run_async` drive it with a blocking or an asyncio
client (the SDK's or amqplink's), so one scenario serves all four, and each returns a
record of what every call gave (``snapshot``) for comparing the libraries. The scenarios
assert what the samples print.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable, Generator
from dataclasses import dataclass, fields
from typing import Any

from amqplink.servicebus.management import _models

Scenario = Generator["Step", Any, None]
_NEVER = dt.timedelta(days=10675199)
_ERRORS = ("ResourceNotFoundError", "ResourceExistsError", "ClientAuthenticationError", "HttpResponseError")


@dataclass(frozen=True)
class Step:
    """A call ``method(*args, **kwargs)`` on the admin client (``send`` sends ``n`` messages to a queue)."""

    label: str
    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] | None = None
    expect: str | None = None
    """The error class (by name, e.g. ``TypeError``) the call must raise; recorded as that name when it does."""


class Failed:
    """What a step that raised gives back: the error class the step expected when it is one, else
    the azure-core error class name (the SDK and amqplink raise classes of the same names)."""

    def __init__(self, error: BaseException, expect: str | None = None) -> None:
        self.names = [c.__name__ for c in type(error).__mro__]
        if expect is not None and expect in self.names:
            self.name = expect
        else:
            self.name = next((n for n in self.names if n in _ERRORS), type(error).__name__)

    def __repr__(self) -> str:
        return f"Failed({self.name})"


def _norm(value: Any, prefix: str) -> Any:
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, dt.datetime):
        return "<time>"
    if isinstance(value, dt.timedelta) and value >= _NEVER:
        # TimeSpan.MaxValue ("never"): the SDK writes it back through a float, 42 us short of it
        return "<never>"
    if isinstance(value, str):
        return value.replace(prefix, "P")
    if isinstance(value, list):
        return [_norm(v, prefix) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v, prefix) for k, v in value.items()}
    if isinstance(value, Failed):
        return repr(value)
    kind = type(value).__name__
    model = getattr(_models, kind, None)
    if model is None or isinstance(value, int | float | bool | dt.timedelta):
        return value
    if kind in ("SqlRuleFilter", "TrueRuleFilter", "FalseRuleFilter"):
        names = ["sql_expression", "parameters"]
    else:
        names = [f.name for f in fields(model) if f.name != "requires_preprocessing"]  # the broker writes none
    return {"type": kind, **{n: _norm(getattr(value, n, None), prefix) for n in names}}


def snapshot(result: Any, prefix: str) -> Any:
    """``result`` as plain values, entity names without the run's ``prefix``, times as ``<time>``."""
    return _norm(result, prefix)


def run_sync(scenario: Scenario, client: Any, send: Callable[[str, int], None], prefix: str) -> list[tuple[str, Any]]:
    """Drive ``scenario`` with a blocking client; the record of ``(label, snapshot)``."""
    record: list[tuple[str, Any]] = []
    result: Any = None
    while True:
        try:
            step = scenario.send(result)
        except StopIteration:
            return record
        try:
            if step.method == "send":
                send(*step.args)
                result = None
            else:
                result = getattr(client, step.method)(*step.args, **(step.kwargs or {}))
                if step.method.startswith("list_"):
                    result = list(result)
        except Exception as exc:  # the scenario expects some calls to fail; recorded by class
            result = Failed(exc, step.expect)
        record.append((step.label, snapshot(result, prefix)))


async def run_async(
    scenario: Scenario, client: Any, send: Callable[[str, int], None], prefix: str
) -> list[tuple[str, Any]]:
    """Drive ``scenario`` with an asyncio client (``list_*`` async iterators, the rest awaited)."""
    record: list[tuple[str, Any]] = []
    result: Any = None
    while True:
        try:
            step = scenario.send(result)
        except StopIteration:
            return record
        try:
            if step.method == "send":
                send(*step.args)
                result = None
            elif step.method.startswith("list_"):
                result = [item async for item in getattr(client, step.method)(*step.args, **(step.kwargs or {}))]
            else:
                result = await getattr(client, step.method)(*step.args, **(step.kwargs or {}))
        except Exception as exc:
            result = Failed(exc, step.expect)
        record.append((step.label, snapshot(result, prefix)))


def _failed(result: Any, name: str) -> bool:
    return isinstance(result, Failed) and name in result.names


def invalid_input_scenario(p: str) -> Scenario:
    """The SDK's own management tests' negative cases: bad names and bad updates fail as the SDK's do."""
    name = f"{p}-bad"
    created = yield Step("create", "create_queue", (name,))
    for label, method, args, expect in (
        ("runtime of None", "get_queue_runtime_properties", (None,), "TypeError"),
        ("runtime of empty", "get_queue_runtime_properties", ("",), "HttpResponseError"),
        ("create empty", "create_queue", ("",), "HttpResponseError"),
        ("delete empty", "delete_queue", ("",), "ValueError"),
        ("update None", "update_queue", (None,), "TypeError"),
        ("update with only a name", "update_queue", ({"name": name},), "TypeError"),
        ("runtime of missing", "get_queue_runtime_properties", (f"{p}-missing",), "ResourceNotFoundError"),
    ):
        result = yield Step(label, method, args, expect=expect)
        assert _failed(result, expect), (label, result)
    created.requires_session = True  # cannot change after creation
    result = yield Step("update requires_session", "update_queue", (created,), expect="HttpResponseError")
    assert _failed(result, "HttpResponseError")
    created.requires_session = False
    created.name = f"{p}-missing"
    result = yield Step("update missing", "update_queue", (created,), expect="HttpResponseError")
    assert _failed(result, "HttpResponseError")
    created.name = name
    created.lock_duration = dt.timedelta(days=25)  # over 5 minutes
    result = yield Step("update bad lock", "update_queue", (created,), expect="HttpResponseError")
    assert _failed(result, "HttpResponseError")
    props = yield Step("get", "get_queue", (name,))
    as_dict = dict(props)
    as_dict["lock_duration"] = dt.timedelta(minutes=2)
    yield Step("update from dict", "update_queue", (as_dict,))
    props = yield Step("get updated", "get_queue", (name,))
    assert props.lock_duration == dt.timedelta(minutes=2)
    yield Step("delete", "delete_queue", (name,))


# -- the samples -----------------------------------------------------------------------
def queue_scenario(p: str) -> Scenario:
    """mgmt_queue: create, list, get, runtime properties, update (property, keyword), delete."""
    name = f"{p}-queue"
    created = yield Step(
        "create",
        "create_queue",
        (name,),
        {"max_delivery_count": 10, "dead_lettering_on_message_expiration": True, "lock_duration": "PT45S"},
    )
    assert created.name == name and created.max_delivery_count == 10
    assert created.lock_duration == dt.timedelta(seconds=45) and created.dead_lettering_on_message_expiration is True
    again = yield Step("create again", "create_queue", (name,))
    assert _failed(again, "ResourceExistsError")
    listed = yield Step("list", "list_queues")
    assert name in [q.name for q in listed]
    props = yield Step("get", "get_queue", (name,))
    assert props.requires_session is False and props.status == "Active"
    yield Step("send", "send", (name, 3))
    runtime = yield Step("runtime", "get_queue_runtime_properties", (name,))
    assert (runtime.active_message_count, runtime.total_message_count, runtime.dead_letter_message_count) == (3, 3, 0)
    assert runtime.size_in_bytes > 0 and runtime.created_at_utc is not None
    runtimes = yield Step("list runtime", "list_queues_runtime_properties")
    assert [r.active_message_count for r in runtimes if r.name == name] == [3]
    props.max_delivery_count = 5
    props.default_message_time_to_live = dt.timedelta(hours=2)
    yield Step("update", "update_queue", (props,))
    updated = yield Step("get updated", "get_queue", (name,))
    assert updated.max_delivery_count == 5 and updated.default_message_time_to_live == dt.timedelta(hours=2)
    yield Step("update by keyword", "update_queue", (updated,), {"max_delivery_count": 3, "user_metadata": "sample"})
    updated = yield Step("get updated by keyword", "get_queue", (name,))
    assert (updated.max_delivery_count, updated.user_metadata) == (3, "sample")
    yield Step("delete", "delete_queue", (name,))
    gone = yield Step("get deleted", "get_queue", (name,))
    assert _failed(gone, "ResourceNotFoundError")
    gone = yield Step("delete deleted", "delete_queue", (name,))
    assert _failed(gone, "ResourceNotFoundError")


def topic_scenario(p: str) -> Scenario:
    """mgmt_topic: create, list, get, runtime properties, update, delete."""
    name = f"{p}-topic"
    created = yield Step("create", "create_topic", (name,), {"default_message_time_to_live": dt.timedelta(hours=1)})
    assert created.name == name and created.default_message_time_to_live == dt.timedelta(hours=1)
    listed = yield Step("list", "list_topics")
    assert name in [t.name for t in listed]
    props = yield Step("get", "get_topic", (name,))
    yield Step("subscription", "create_subscription", (name, "s1"))
    runtime = yield Step("runtime", "get_topic_runtime_properties", (name,))
    assert runtime.subscription_count == 1 and runtime.scheduled_message_count == 0
    yield Step("list runtime", "list_topics_runtime_properties")
    props.default_message_time_to_live = dt.timedelta(minutes=10)
    props.max_size_in_megabytes = 2048
    yield Step("update", "update_topic", (props,))
    updated = yield Step("get updated", "get_topic", (name,))
    assert updated.default_message_time_to_live == dt.timedelta(minutes=10) and updated.max_size_in_megabytes == 2048
    yield Step("delete", "delete_topic", (name,))
    gone = yield Step("get deleted", "get_topic", (name,))
    assert _failed(gone, "ResourceNotFoundError")


def subscription_scenario(p: str) -> Scenario:
    """mgmt_subscription: create, list, get, runtime properties, update, delete."""
    topic = f"{p}-subtopic"
    yield Step("topic", "create_topic", (topic,))
    created = yield Step("create", "create_subscription", (topic, "sub"), {"max_delivery_count": 4})
    assert created.name == "sub" and created.max_delivery_count == 4
    again = yield Step("create again", "create_subscription", (topic, "sub"))
    assert _failed(again, "ResourceExistsError")
    listed = yield Step("list", "list_subscriptions", (topic,))
    assert [s.name for s in listed] == ["sub"]
    props = yield Step("get", "get_subscription", (topic, "sub"))
    runtime = yield Step("runtime", "get_subscription_runtime_properties", (topic, "sub"))
    assert runtime.active_message_count == 0 and runtime.total_message_count == 0
    yield Step("list runtime", "list_subscriptions_runtime_properties", (topic,))
    props.max_delivery_count = 9
    props.lock_duration = dt.timedelta(seconds=90)
    yield Step("update", "update_subscription", (topic, props))
    updated = yield Step("get updated", "get_subscription", (topic, "sub"))
    assert updated.max_delivery_count == 9 and updated.lock_duration == dt.timedelta(seconds=90)
    yield Step("delete", "delete_subscription", (topic, "sub"))
    gone = yield Step("get deleted", "get_subscription", (topic, "sub"))
    assert _failed(gone, "ResourceNotFoundError")
    yield Step("delete topic", "delete_topic", (topic,))


def rule_scenario(p: str, models: Any) -> Scenario:
    """mgmt_rule: a SQL filter with an action, a correlation filter with properties, list, get, update, delete.

    ``models`` is the library's management module (its filter and action classes)."""
    topic = f"{p}-ruletopic"
    yield Step("topic", "create_topic", (topic,))
    yield Step("subscription", "create_subscription", (topic, "sub"))
    rules = yield Step("list default", "list_rules", (topic, "sub"))
    assert [(r.name, type(r.filter).__name__) for r in rules] == [("$Default", "TrueRuleFilter")]
    sql = yield Step(
        "create sql",
        "create_rule",
        (topic, "sub", "sql"),
        {"filter": models.SqlRuleFilter("property1 = 'value'"), "action": models.SqlRuleAction("SET property2 = 'x'")},
    )
    assert sql.filter.sql_expression == "property1 = 'value'" and sql.action.sql_expression == "SET property2 = 'x'"
    when = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
    correlation = models.CorrelationRuleFilter(
        correlation_id="id", label="red", properties={"key1": "value1", "n": 2, "on": True, "when": when}
    )
    corr = yield Step("create correlation", "create_rule", (topic, "sub", "corr"), {"filter": correlation})
    assert corr.filter.correlation_id == "id" and corr.filter.label == "red"
    assert corr.filter.properties == {"key1": "value1", "n": 2, "on": True, "when": when}
    yield Step("create false", "create_rule", (topic, "sub", "never"), {"filter": models.FalseRuleFilter()})
    plain = yield Step("create without filter", "create_rule", (topic, "sub", "plain"))
    assert type(plain.filter).__name__ == "TrueRuleFilter" and plain.action is None
    listed = yield Step("list", "list_rules", (topic, "sub"))
    assert sorted(r.name for r in listed) == ["$Default", "corr", "never", "plain", "sql"]
    runtime = yield Step("topic runtime", "get_topic_runtime_properties", (topic,))
    assert (runtime.sql_filter_count, runtime.correlation_filter_count) == (4, 1)
    got = yield Step("get", "get_rule", (topic, "sub", "sql"))
    got.filter = models.SqlRuleFilter("property1 = 'other'")
    yield Step("update", "update_rule", (topic, "sub", got))
    got = yield Step("get updated", "get_rule", (topic, "sub", "sql"))
    assert got.filter.sql_expression == "property1 = 'other'"
    flt = models.SqlRuleFilter("property1 = 'third'")
    yield Step("update by keyword", "update_rule", (topic, "sub", got), {"filter": flt})
    got = yield Step("get updated by keyword", "get_rule", (topic, "sub", "sql"))
    assert got.filter.sql_expression == "property1 = 'third'" and got.action.sql_expression == "SET property2 = 'x'"
    yield Step("delete", "delete_rule", (topic, "sub", "sql"))
    gone = yield Step("get deleted", "get_rule", (topic, "sub", "sql"))
    assert _failed(gone, "ResourceNotFoundError")
    yield Step("delete topic", "delete_topic", (topic,))


def namespace_scenario(p: str) -> Scenario:
    """mgmt_namespace: the namespace's properties."""
    props = yield Step("namespace", "get_namespace_properties")
    assert props.name and str(getattr(props.messaging_sku, "value", props.messaging_sku)) == "Standard"
    assert str(getattr(props.namespace_type, "value", props.namespace_type)) == "Messaging"


def scenarios(p: str, models: Any) -> dict[str, Scenario]:
    """Every sample's scenario for a run whose entity names start with ``p``."""
    return {
        "queue": queue_scenario(p),
        "topic": topic_scenario(p),
        "subscription": subscription_scenario(p),
        "rule": rule_scenario(p, models),
        "namespace": namespace_scenario(p),
        "invalid input": invalid_input_scenario(p),
    }
