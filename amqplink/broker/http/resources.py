"""One namespace's resources in the Service Bus management REST API (served by :mod:`.server`).

Routes (paths as the SDK's ``ServiceBusAdministrationClient`` forms them; the words
``subscriptions`` and ``rules`` in any case):

* ``GET /$namespaceinfo``; ``GET /$Resources/queues`` and ``/$Resources/topics``
  (``$skip``, ``$top`` at most :data:`MAX_PAGE`, a ``next`` link while more remain, with the
  request's ``api-version``);
* ``GET|PUT|DELETE /ENTITY``, ``/TOPIC/subscriptions/SUB``, ``/TOPIC/subscriptions/SUB/rules/RULE``;
  ``GET /TOPIC/subscriptions`` and ``/TOPIC/subscriptions/SUB/rules`` list.

``PUT`` creates (``201``; ``409`` if it exists) unless ``If-Match`` is given, which
updates (``200``; ``404`` if missing). Every request needs a SAS token in
``Authorization`` signed with a rule of this namespace that has Manage (reading runtime
counts too, as on Service Bus), whose audience covers the URL's path and names one of the
namespace's own hosts (:mod:`amqplink.broker.audience`; the request's ``Host`` header chose
the namespace but proves nothing): otherwise ``401``. Bodies are bounded (:data:`MAX_BODY`,
``413``); a body that is not a valid description is ``400`` naming what is wrong (a SQL
expression's position too). Every error carries ``<Error><Code/><Detail/></Error>``.
"""

from __future__ import annotations

import functools
import logging
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError

from amqplink import AMQPLinkError
from amqplink.atom import document as atom
from amqplink.atom.authorization import SharedAccessRule
from amqplink.atom.xmlsafe import local_name, parse_xml
from amqplink.broker.audience import NamespaceNames
from amqplink.broker.config import EntityProperties, QueueConfig, RuleConfig, SubscriptionConfig, TopicConfig
from amqplink.broker.http.descriptions import (
    Counts,
    EntityMeta,
    created,
    described_access_rules,
    description_of,
    queue_description,
    read_access_rules,
    read_meta,
    read_properties,
    read_rule,
    replacing,
    rule_description,
    subscription_description,
    topic_description,
)
from amqplink.broker.namespace.counts import entity_counts, topic_counts
from amqplink.broker.namespace.errors import EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.namespace import DEFAULT_RULE, AnyQueue, AnySubscription, Namespace, Topic
from amqplink.broker.rights import AccessRule, AccessRules, Right, describe_rights, path_covers
from amqplink.sbwire.sas import SasTokenError

__all__ = ["MAX_BODY", "MAX_PAGE", "ApiError", "NamespaceApi", "error_response"]

log = logging.getLogger(__name__)

MAX_BODY = 256 * 1024
"""Bytes of a request body at most (a description is a few KiB); larger ones get 413."""
MAX_PAGE = 100
"""Entries one list response holds at most (Service Bus's ``$top`` limit)."""
_ENTITY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,259}", re.ASCII)
_SEGMENT = re.compile(r"[A-Za-z0-9._-]{1,260}", re.ASCII)
_CHILD_NAME = re.compile(r"[A-Za-z0-9$][A-Za-z0-9._$-]{0,49}", re.ASCII)
_XML = "application/atom+xml;type=entry;charset=utf-8"
_FEED = "application/atom+xml;type=feed;charset=utf-8"


class ApiError(AMQPLinkError):
    """An HTTP error answer: ``status`` and the detail put in the error document."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _name(text: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.fullmatch(text):
        raise ApiError(400, f"{text[:80]!r} is not a valid {what} name")
    return text


def _segmented_name(parts: list[str]) -> str:
    """An entity name made of ``/``-separated segments, 260 characters at most: the first a valid
    name, each other one letters, digits, periods, hyphens and underscores (``txt/.-_123``, which
    the SDK's own management tests create on Service Bus)."""
    first, *rest = parts
    name = "/".join(
        [_name(first, _ENTITY_NAME, "entity name"), *(_name(p, _SEGMENT, "entity name segment") for p in rest)]
    )
    if len(name) > 260:
        raise ApiError(400, f"the entity name {name[:80]!r}... is longer than 260 characters")
    return name


def _xml_response(status: int, body: str, content_type: str = _XML) -> web.Response:
    return web.Response(status=status, body=body.encode("utf-8"), headers={"Content-Type": content_type})


def error_response(status: int, detail: str) -> web.Response:
    """An error answer with Service Bus's error document."""
    return _xml_response(status, atom.error_document(status, detail), "application/xml;charset=utf-8")


def _entity_counts(entity: MessagingEntity, dlq: MessagingEntity) -> Counts:
    return entity_counts(entity, dlq, Counts)


def _topic_counts(topic: Topic) -> Counts:
    return topic_counts(topic, Counts)


class NamespaceApi:
    """The management API's resources of one namespace: :meth:`authorize`, then :meth:`dispatch`."""

    def __init__(
        self,
        namespace: Namespace,
        rules: Callable[[], AccessRules],
        *,
        names: NamespaceNames | None = None,
        max_body: int = MAX_BODY,
        clock: Callable[[], float] = time.time,
        on_deleted: Callable[[set[object]], None] | None = None,
    ) -> None:
        self.namespace = namespace
        self._rules = rules
        self.names = names
        """The host names a token's audience may name (None: not checked)."""
        self.on_deleted = on_deleted
        """Told the queues, topics, subscriptions and dead-letter queues a DELETE removed (to detach their links)."""
        self.max_body = max_body
        self.clock = clock
        self.started = clock()
        self._meta: dict[str, EntityMeta] = {}
        """Creation times and API-only fields by lower-cased path; one per entity or rule."""

    def authorize(self, request: web.Request) -> None:
        """Refuse (401) a request whose token this namespace does not accept for its path with Manage."""
        token = request.headers.get("Authorization")
        if not token:
            raise ApiError(401, "the request has no Authorization header: send a SAS token for the namespace")
        path = request.path.strip("/").lower()
        try:
            local = None if request.transport is None else request.transport.get_extra_info("sockname")
            grant = self._rules().verify(token, now=self.clock(), names=self.names, local=local)
        except SasTokenError as exc:
            log.info("management API: refused a token for %s %s (%s)", request.method, request.path, exc.reason.name)
            raise ApiError(401, f"the SAS token is not valid: {exc}") from None
        if not path_covers(grant.path, path):
            raise ApiError(401, f"the SAS token is for {grant.path!r}, not {path!r}")
        if Right.MANAGE not in grant.rights:
            raise ApiError(
                401,
                f"Unauthorized access: 'Manage' claim is required on {path or '(the namespace)'!r};"
                f" rule {grant.rule!r} grants {describe_rights(grant.rights)}",
            )

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        """The answer to an authorized request."""
        parts = request.match_info["path"].strip("/").split("/")
        lowered = [p.lower() for p in parts]
        method = request.method
        body = await self._body(request) if method == "PUT" else b""
        if lowered == ["$namespaceinfo"] and method == "GET":
            return self._namespace_info(request)
        if len(parts) == 2 and lowered[0] == "$resources" and method == "GET":
            return self._list_entities(request, lowered[1])
        if len(parts) == 1 and parts[0]:
            return self._entity(request, method, _name(parts[0], _ENTITY_NAME, "entity"), body)
        if len(parts) > 1 and "subscriptions" not in lowered[1:] and all(parts):
            # a queue or topic whose name has segments, e.g. contoso/x-servicebus-transfer/0
            return self._entity(request, method, _segmented_name(parts), body)
        if "subscriptions" in lowered[1:] and all(parts):
            at = lowered.index("subscriptions", 1)  # the topic's name may have segments (site1/orders)
            topic = self.namespace.topic(
                _segmented_name(parts[:at]) if at > 1 else _name(parts[0], _ENTITY_NAME, "topic")
            )
            rest, lowered_rest = parts[at:], lowered[at:]
            if len(rest) == 1 and method == "GET":
                return self._list_subscriptions(request, topic)
            if len(rest) == 2:
                return self._subscription(request, method, topic, _name(rest[1], _CHILD_NAME, "subscription"), body)
            if len(rest) >= 3 and lowered_rest[2] == "rules":
                sub = self.namespace.subscription(topic.name, _name(rest[1], _CHILD_NAME, "subscription"))
                if len(rest) == 3 and method == "GET":
                    return self._list_rules(request, sub)
                if len(rest) == 4:
                    return self._rule(request, method, sub, _name(rest[3], _CHILD_NAME, "rule"), body)
        raise ApiError(404 if method in ("GET", "PUT", "DELETE") else 405, f"no resource {request.path!r} for {method}")

    async def _body(self, request: web.Request) -> bytes:
        if request.content_length is not None and request.content_length > self.max_body:
            raise ApiError(413, f"the request body is larger than {self.max_body} bytes")
        try:
            return await request.read()
        except RequestPayloadError as exc:  # a broken chunked encoding, say
            raise ApiError(400, f"the request body cannot be read: {exc}") from None

    # -- helpers ------------------------------------------------------------------
    def _url(self, request: web.Request, path: str) -> str:
        return f"https://{request.host}/{path}"

    def _get_meta(self, path: str) -> EntityMeta:
        meta = self._meta.get(path.lower())
        return meta if meta is not None else EntityMeta(self.started, self.started)

    def _deleted(self, path: str, *nodes: MessagingEntity | Topic) -> web.Response:
        found: set[object] = set()
        for node in nodes:
            found.add(node)
            if isinstance(node, Topic):
                for sub in node.subscriptions.values():
                    found.update((sub, sub.dead_letter_queue))
            else:
                found.add(getattr(node, "dead_letter_queue", node))
        if self.on_deleted is not None:
            self.on_deleted(found)
        self._forget(path)
        return web.Response(status=200)

    def _forget(self, path: str) -> None:
        prefix = path.lower() + "/"
        for key in [k for k in self._meta if k == path.lower() or k.startswith(prefix)]:
            del self._meta[key]

    def _entry_xml(self, request: web.Request, path: str, title: str, description: str) -> str:
        meta = self._get_meta(path)
        return atom.entry(
            self._url(request, path),
            title,
            description,
            published=meta.created,
            updated=meta.updated,
            author=self.namespace.name,
        )

    def _entry(self, request: web.Request, path: str, title: str, description: str, status: int = 200) -> web.Response:
        return _xml_response(status, self._entry_xml(request, path, title, description))

    def _page(self, request: web.Request) -> tuple[int, int]:
        try:
            skip = int(request.query.get("$skip", "0"))
            top = int(request.query.get("$top", str(MAX_PAGE)))
        except ValueError:
            raise ApiError(400, "$skip and $top must be whole numbers") from None
        if skip < 0 or top < 1:
            raise ApiError(400, "$skip must be at least 0 and $top at least 1")
        return skip, min(top, MAX_PAGE)

    def _feed(self, request: web.Request, title: str, names: list[str], render: Callable[[str], str]) -> web.Response:
        skip, top = self._page(request)
        page = sorted(names, key=str.lower)[skip : skip + top]
        more = skip + top < len(names)
        url = self._url(request, request.path.lstrip("/"))
        version = request.query.get("api-version", "2021-05")
        next_url = f"{url}?$skip={skip + top}&$top={top}&api-version={quote(version)}" if more else None
        body = atom.feed(url, title, (render(n) for n in page), updated=self.clock(), next_url=next_url)
        return _xml_response(200, body, _FEED)

    @staticmethod
    def _parse(body: bytes, *kinds: str) -> ET.Element:
        """The first of ``kinds`` the body's Atom entry holds; 400 naming what is wrong otherwise."""
        problem = "no description"
        try:
            root = parse_xml(body)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        for kind in kinds:
            try:
                return description_of(root, kind)
            except ValueError as exc:
                problem = str(exc)
        raise ApiError(400, problem if len(kinds) == 1 else f"the entry's content holds no {' or '.join(kinds)}")

    def _read_properties(self, desc: ET.Element, base: EntityProperties) -> EntityProperties:
        try:
            return read_properties(desc, base, premium=self.namespace.partition_all)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None

    def _replaced_meta(self, desc: ET.Element, path: str, now: float) -> EntityMeta:
        """An update's API-only fields: the description's, defaults for those it leaves out."""
        return _read_meta(desc, EntityMeta(self._get_meta(path).created, now), now)

    @staticmethod
    def _updating(request: web.Request) -> bool:
        return "If-Match" in request.headers

    # -- namespace ----------------------------------------------------------------
    def _namespace_info(self, request: web.Request) -> web.Response:
        ns = self.namespace.name
        info = (
            f'<NamespaceInfo xmlns="{atom.SB_NS}" xmlns:i="{atom.XSI_NS}">'
            + atom.element("CreatedTime", atom.format_time(self.started))
            + atom.element("MessagingSKU", "Standard")
            + atom.element("ModifiedTime", atom.format_time(self.started))
            + atom.element("Name", ns)
            + atom.element("NamespaceType", "Messaging")
            + "</NamespaceInfo>"
        )
        return _xml_response(
            200,
            atom.entry(
                self._url(request, "$namespaceinfo"), ns, info, published=self.started, updated=self.started, author=ns
            ),
        )

    # -- queues and topics --------------------------------------------------------
    def _list_entities(self, request: web.Request, kind: str) -> web.Response:
        if kind == "queues":
            queues = self.namespace.queues
            return self._feed(
                request, "Queues", [q.name for q in queues.values()], lambda n: self._queue_entry(request, n)
            )
        if kind == "topics":
            topics = self.namespace.topics
            return self._feed(
                request, "Topics", [t.name for t in topics.values()], lambda n: self._topic_entry(request, n)
            )
        raise ApiError(404, f"no entity type {kind!r}: queues or topics")

    def _queue_xml(self, name: str) -> str:
        queue = self.namespace.queue(name)
        return queue_description(
            queue.properties,
            self._get_meta(queue.name),
            _entity_counts(queue, queue.dead_letter_queue),
            self._access_described(queue.name),
        )

    # -- a queue's or topic's own authorization rules --------------------------------
    @staticmethod
    def _access_path(entity: str, rule: str) -> str:
        return f"{entity}/$authorizationrules/{rule}".lower()

    def _access_described(self, entity: str) -> list[SharedAccessRule]:
        def times(rule: AccessRule) -> tuple[float, float]:
            meta = self._get_meta(self._access_path(entity, rule.name))
            return meta.created, meta.updated

        return described_access_rules(self.namespace.access_rules.get(entity.lower(), ()), times)

    @staticmethod
    def _read_access(desc: ET.Element) -> tuple[AccessRule, ...]:
        try:
            return read_access_rules(desc)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None

    def _set_access(self, entity: str, rules: tuple[AccessRule, ...], now: float) -> None:
        """Replace the entity's own rules: a rule kept as it was keeps its times, a changed one
        is modified now, a new one created now; a rule left out no longer authorizes anything."""
        before = {rule.name: rule for rule in self.namespace.access_rules.get(entity.lower(), ())}
        metas = {}
        for rule in rules:
            old = before.get(rule.name)
            meta = self._get_meta(self._access_path(entity, rule.name))
            if old is None:
                meta = EntityMeta(now, now)
            elif (old.keys, old.rights) != (rule.keys, rule.rights):
                meta = EntityMeta(meta.created, now)
            metas[self._access_path(entity, rule.name)] = meta
        _apply(lambda: self.namespace.set_access_rules(entity, rules))
        self._forget(f"{entity}/$authorizationrules")
        self._meta.update(metas)

    def _topic_xml(self, name: str) -> str:
        topic = self.namespace.topic(name)
        # True and False filters are SQL filters on Service Bus (TrueFilter derives from SqlFilter,
        # "1=1"), so SqlFilterCount counts every subscription's $Default rule too.
        filters: dict[str, int] = {}
        for sub in topic.subscriptions.values():
            for rule in sub.rules:
                kind = "Correlation" if rule.filter_type == "Correlation" else "Sql"
                filters[kind] = filters.get(kind, 0) + 1
        return topic_description(
            topic.properties,
            self._get_meta(topic.name),
            _topic_counts(topic),
            len(topic.subscriptions),
            filters,
            self._access_described(topic.name),
        )

    def _queue_entry(self, request: web.Request, name: str) -> str:
        queue = self.namespace.queue(name)
        return self._entry_xml(request, queue.name, queue.name, self._queue_xml(name))

    def _topic_entry(self, request: web.Request, name: str) -> str:
        topic = self.namespace.topic(name)
        return self._entry_xml(request, topic.name, topic.name, self._topic_xml(name))

    def _entity(self, request: web.Request, method: str, name: str, body: bytes) -> web.Response:
        ns = self.namespace
        key = name.lower()
        if method == "GET":
            if key in ns.queues:
                return self._entry(request, ns.queues[key].name, ns.queues[key].name, self._queue_xml(name))
            if key in ns.topics:
                return self._entry(request, ns.topics[key].name, ns.topics[key].name, self._topic_xml(name))
            raise ApiError(404, f"no queue or topic {name!r} in namespace {ns.name!r}")
        if method == "DELETE":
            if key in ns.queues:
                return self._deleted(name, ns.delete_queue(name))
            if key in ns.topics:
                return self._deleted(name, ns.delete_topic(name))
            raise ApiError(404, f"no queue or topic {name!r} in namespace {ns.name!r}")
        if method != "PUT":
            raise ApiError(405, f"{method} is not allowed on {name!r}")
        desc = self._parse(body, "QueueDescription", "TopicDescription")
        kind = local_name(desc.tag)
        now = self.clock()
        access = self._read_access(desc)
        if self._updating(request):
            current: AnyQueue | Topic
            if kind == "QueueDescription":
                current = queue = ns.queue(name)
                update, describe = functools.partial(ns.update_queue, queue), self._queue_xml
            else:
                current = topic = ns.topic(name)
                update, describe = functools.partial(ns.update_topic, topic), self._topic_xml
            properties = self._read_properties(desc, replacing(current.properties))
            meta = self._replaced_meta(desc, name, now)
            _apply(lambda: update(properties))
            self._meta[key] = meta
            self._set_access(current.name, access, now)
            return self._entry(request, current.name, current.name, describe(name))
        if key in ns.queues or key in ns.topics:
            raise ApiError(409, f"an entity called {name!r} exists already in namespace {ns.name!r}")
        properties = self._read_properties(desc, created(self.namespace.partition_all))
        meta = _read_meta(desc, EntityMeta(now, now), now)
        ns.check_room()
        if kind == "QueueDescription":
            ns.add_queue(QueueConfig(name, properties))
        else:
            ns.add_topic(TopicConfig(name, properties))
        self._meta[key] = meta
        if access:
            self._set_access(name, access, now)
        what = "queue" if kind == "QueueDescription" else "topic"
        log.info("management API: %s %r created (%d authorization rules)", what, name, len(access))
        xml = self._queue_xml(name) if kind == "QueueDescription" else self._topic_xml(name)
        return self._entry(request, name, name, xml, status=201)

    # -- subscriptions ------------------------------------------------------------
    def _sub_path(self, topic: Topic, name: str) -> str:
        return f"{topic.name}/Subscriptions/{name}"

    def _sub_xml(self, topic: Topic, name: str) -> str:
        sub = self.namespace.subscription(topic.name, name)
        return subscription_description(
            sub.properties, self._get_meta(sub.path), _entity_counts(sub, sub.dead_letter_queue)
        )

    def _list_subscriptions(self, request: web.Request, topic: Topic) -> web.Response:
        def render(name: str) -> str:
            return self._entry_xml(request, self._sub_path(topic, name), name, self._sub_xml(topic, name))

        return self._feed(request, "Subscriptions", [s.name for s in topic.subscriptions.values()], render)

    def _subscription(self, request: web.Request, method: str, topic: Topic, name: str, body: bytes) -> web.Response:
        ns = self.namespace
        path = self._sub_path(topic, name)
        if method == "GET":
            sub = ns.subscription(topic.name, name)
            return self._entry(request, sub.path, sub.name, self._sub_xml(topic, name))
        if method == "DELETE":
            return self._deleted(path, ns.delete_subscription(topic.name, name))
        if method != "PUT":
            raise ApiError(405, f"{method} is not allowed on {path!r}")
        desc = self._parse(body, "SubscriptionDescription")
        now = self.clock()
        if self._updating(request):
            sub = ns.subscription(topic.name, name)
            properties = self._read_properties(desc, replacing(sub.properties))
            self._meta[path.lower()] = self._replaced_meta(desc, path, now)
            _apply(lambda: ns.update_subscription(topic, sub, properties))
            return self._entry(request, sub.path, sub.name, self._sub_xml(topic, name))
        if name.lower() in topic.subscriptions:
            raise ApiError(409, f"subscription {name!r} exists already on topic {topic.name!r}")
        properties = self._read_properties(desc, created(self.namespace.partition_all))
        meta = _read_meta(desc, EntityMeta(now, now), now)
        default = next((child for child in desc if local_name(child.tag) == "DefaultRuleDescription"), None)
        rule = DEFAULT_RULE if default is None else _read_rule(default, DEFAULT_RULE.name)
        sub = _apply(lambda: ns.create_subscription(topic, SubscriptionConfig(name, properties, (rule,))))
        self._meta[path.lower()] = meta
        self._meta[f"{path}/rules/{rule.name}".lower()] = EntityMeta(now, now)
        log.info("management API: subscription %r created", sub.path)
        return self._entry(request, sub.path, sub.name, self._sub_xml(topic, name), status=201)

    # -- rules ------------------------------------------------------------------
    def _rule_entry_xml(self, sub: AnySubscription, rule: RuleConfig) -> str:
        return rule_description(rule, self._get_meta(f"{sub.path}/rules/{rule.name}").created)

    def _list_rules(self, request: web.Request, sub: AnySubscription) -> web.Response:
        rules = {r.name: r for r in sub.rules}

        def render(name: str) -> str:
            return self._entry_xml(request, f"{sub.path}/rules/{name}", name, self._rule_entry_xml(sub, rules[name]))

        return self._feed(request, "Rules", list(rules), render)

    def _rule(self, request: web.Request, method: str, sub: AnySubscription, name: str, body: bytes) -> web.Response:
        path = f"{sub.path}/rules/{name}"
        index = next((i for i, r in enumerate(sub.rules) if r.name.lower() == name.lower()), None)
        if method == "GET":
            if index is None:
                raise ApiError(404, f"no rule {name!r} on {sub.path!r}")
            rule = sub.rules[index]
            return self._entry(request, path, rule.name, self._rule_entry_xml(sub, rule))
        if method == "DELETE":
            if index is None:
                raise ApiError(404, f"no rule {name!r} on {sub.path!r}")
            self.namespace.set_rules(sub, sub.rules[:index] + sub.rules[index + 1 :])
            self._forget(path)
            return web.Response(status=200)
        if method != "PUT":
            raise ApiError(405, f"{method} is not allowed on {path!r}")
        rule = _read_rule(self._parse(body, "RuleDescription"), name)
        now = self.clock()
        if self._updating(request):
            if index is None:
                raise ApiError(404, f"no rule {name!r} on {sub.path!r}")
            rules = (*sub.rules[:index], rule, *sub.rules[index + 1 :])
            status = 200
            self._meta[path.lower()] = EntityMeta(self._get_meta(path).created, now)
        else:
            if index is not None:
                raise ApiError(409, f"rule {name!r} exists already on {sub.path!r}")
            rules = (*sub.rules, rule)
            status = 201
            self._meta[path.lower()] = EntityMeta(now, now)
        self.namespace.set_rules(sub, rules)
        log.info("management API: rule %r of %r %s", name, sub.path, "updated" if status == 200 else "created")
        return self._entry(request, path, rule.name, self._rule_entry_xml(sub, rule), status=status)


def _read_meta(desc: Any, base: EntityMeta, now: float) -> EntityMeta:
    try:
        return read_meta(desc, base, now)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None


def _read_rule(desc: Any, name: str) -> RuleConfig:
    try:
        return read_rule(desc, name)
    except ValueError as exc:  # SqlFilterError names the position
        raise ApiError(400, f"rule {name!r}: {exc}") from None


def _apply(change: Callable[[], Any]) -> Any:
    try:
        return change()
    except EntityError:
        raise
    except ValueError as exc:  # a setting Service Bus does not let change, an existing name
        raise ApiError(400, str(exc)) from None
