"""What each administration call sends and how its answer reads, without I/O.

Both clients (blocking on :mod:`http.client`, asyncio on aiohttp) run the same
:class:`Call` and :class:`Listing` objects, so the paths, headers, bodies and the reading
of answers exist once. Paths are the SDK's: ``/NAME``, ``/TOPIC/Subscriptions/SUB``,
``/TOPIC/Subscriptions/SUB/Rules/RULE``, ``/$Resources/queues`` (``$skip``/``$top``),
``/$namespaceinfo``, each with ``api-version``; an update is a ``PUT`` with ``If-Match: *``.
Authorization: a SAS token for ``https://HOST[:PORT]`` (a named key signs a fresh one per
hour), a SAS credential's own token, or ``Bearer`` and a token credential's token.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qs, quote, urlsplit

from amqplink.atom.xmlsafe import parse_xml
from amqplink.servicebus.connection_string import _segments, parse_connection_string
from amqplink.servicebus.management import _xml
from amqplink.servicebus.management._errors import (
    HttpResponseError,
    InvalidNameError,
    InvalidNameTypeError,
    ServiceRequestError,
    error_for_status,
)
from amqplink.servicebus.management._models import (
    CorrelationRuleFilter,
    DataclassModel,
    NamespaceProperties,
    QueueProperties,
    QueueRuntimeProperties,
    RuleProperties,
    SqlRuleAction,
    SqlRuleFilter,
    SubscriptionProperties,
    SubscriptionRuntimeProperties,
    TopicProperties,
    TopicRuntimeProperties,
    TrueRuleFilter,
)
from amqplink.servicebus.sas import generate_sas_token
from amqplink.servicebus.tokens import JWT_SCOPE

__all__ = ["AdminCore", "Call", "Listing", "endpoint_from_connection_string"]

log = logging.getLogger("amqplink.servicebus.management")
T = TypeVar("T")
M = TypeVar("M", bound=DataclassModel)
DEFAULT_API_VERSION = "2024-05"
"""The SDK's default (azure-servicebus 7.15: ``ApiVersion.V2024_05``, which serves the topic filter counts)."""
PAGE_SIZE = 100
TOKEN_TTL = 3600
_ATOM = "application/atom+xml;type=entry;charset=utf-8"


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer's body."""

    method: str
    path: str
    what: str
    """What the call is about, for errors (``queue 'orders'``)."""
    read: Callable[[bytes], T]
    body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Listing(Generic[T]):
    """A paged list: ``path`` with ``$skip``/``$top``, each entry read with ``read``.

    A page's continuation token is the feed's ``next`` link, as in the SDK (whose
    ``get_next_template`` reads ``$skip`` and ``$top`` back from it); the first page is
    ``$skip=start_index``, ``$top=max_page_size`` (the SDK's keywords, 0 and 100 by default).
    """

    path: str
    what: str
    read: Callable[[ET.Element], T]

    def page(
        self, token: str | None, api_version: str, *, start_index: int = 0, max_page_size: int = PAGE_SIZE
    ) -> Call[tuple[list[T], str | None]]:
        """The page ``token`` names (None: the first); its answer reads as the items and the next token."""

        def read(body: bytes) -> tuple[list[T], str | None]:
            found, next_link = _xml.entries(body)
            return [self.read(e) for e in found], next_link if found else None

        skip, top = (start_index, max_page_size) if token is None else _skip_top(token)
        query = f"$skip={skip}&$top={top}&api-version={api_version}"
        return Call("GET", f"{self.path}?{query}", self.what, read)


def _skip_top(token: str) -> tuple[int, int]:
    """``$skip`` and ``$top`` of a continuation token (a ``next`` link)."""
    query = parse_qs(urlsplit(token).query) if isinstance(token, str) else {}
    try:
        return int(query["$skip"][0]), int(query["$top"][0])
    except (KeyError, ValueError):
        raise ValueError(f"{token!r} is not a continuation token of a management listing") from None


def endpoint_from_connection_string(conn_str: str) -> tuple[str, bool, Any]:
    """``(HOST[:PORT], use_tls, credential)`` of a connection string; the port is kept as given."""
    from amqplink.servicebus.credentials import AzureNamedKeyCredential, AzureSasCredential

    parsed = parse_connection_string(conn_str)
    netloc = urlsplit(_segments(conn_str)["endpoint"]).netloc
    credential: Any
    if parsed.shared_access_signature is not None:
        credential = AzureSasCredential(parsed.shared_access_signature)
    else:
        assert parsed.shared_access_key_name is not None and parsed.shared_access_key is not None
        credential = AzureNamedKeyCredential(parsed.shared_access_key_name, parsed.shared_access_key)
    return netloc, parsed.use_tls, credential


def _check_name(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidNameTypeError(f"{what} must be a str, not {type(value).__name__}", status_code=None)
    if not value:
        raise InvalidNameError(f"{what} must not be empty", status_code=None)
    return value


def _path(*names: str) -> str:
    return "/" + "/".join(quote(n, safe="/$") for n in names)


def _subscription_label(topic: str, sub: str) -> str:
    return f"subscription {topic}/{sub!r}"


def _rule_label(topic: str, sub: str, rule: str) -> str:
    return f"rule {rule!r} of {topic}/{sub}"


def _entry(read: Callable[[ET.Element], T]) -> Callable[[bytes], T]:
    return lambda body: read(parse_xml(body))


def _none(body: bytes) -> None:
    return None


def _model(value: Any, cls: type[M], overrides: Mapping[str, Any]) -> M:
    """A copy of ``value`` (a model or a mapping of its fields) with ``overrides`` applied."""
    if isinstance(value, cls):
        model = dataclasses.replace(value)
    elif isinstance(value, Mapping):
        model = cls(**value)
    else:
        raise TypeError(f"update input must be a {cls.__name__} or a mapping representing one")
    for key, item in overrides.items():
        if not hasattr(model, key):
            raise TypeError(f"{cls.__name__} has no property {key!r}")
        setattr(model, key, item)
    return model


class AdminCore:
    """Everything but the I/O: the endpoint, the authorization header and each call."""

    def __init__(self, fully_qualified_namespace: str, credential: Any, *, api_version: str, use_tls: bool) -> None:
        if not isinstance(fully_qualified_namespace, str) or not fully_qualified_namespace:
            raise ValueError("fully_qualified_namespace must be a host name (HOST or HOST:PORT)")
        if not any(hasattr(credential, a) for a in ("named_key", "signature", "get_token")):
            raise TypeError(
                "credential must be an AzureNamedKeyCredential, an AzureSasCredential or a token credential"
                f" (an object with get_token), not {type(credential).__name__}"
            )
        netloc = fully_qualified_namespace.split("://", 1)[-1].rstrip("/")
        self.fully_qualified_namespace = netloc
        self.scheme = "https" if use_tls else "http"
        self.api_version = str(getattr(api_version, "value", api_version))  # the SDK's ApiVersion enum too
        self._credential = credential
        self._token: tuple[str, float] | None = None

    # -- addressing and authorization ------------------------------------------------
    @property
    def host_port(self) -> tuple[str, int | None]:
        parts = urlsplit(f"//{self.fully_qualified_namespace}")
        return parts.hostname or self.fully_qualified_namespace, parts.port

    @property
    def endpoint(self) -> str:
        """``https://HOST[:PORT]`` (``http://`` without TLS)."""
        return f"{self.scheme}://{self.fully_qualified_namespace}"

    def no_answer(self, call: Call[Any], exc: BaseException) -> ServiceRequestError:
        """The error for a request that got no answer; over plain HTTP it says how to ask
        for HTTPS, which a server that speaks only HTTPS (the embedded broker's
        ``--http-port``) needs: it closes a plain request without a word."""
        text = f"{call.what}: no answer from {self.endpoint} ({type(exc).__name__}: {exc})"
        if "CERTIFICATE_VERIFY_FAILED" in str(exc):
            text += (
                "; the server's certificate is not one the system trusts: pass connection_verify=CA_FILE (for"
                " the embedded broker, the certificate file it printed)"
            )
        elif self.scheme == "http":
            text += (
                "; this client speaks plain HTTP (UseDevelopmentEmulator=true in the connection string, or"
                " use_tls=False): for an HTTPS port, such as the embedded broker's --http-port, pass"
                " connection_verify=CA_FILE (the certificate file the broker printed)"
            )
        return ServiceRequestError(text, error=exc)

    def _token_for(self, audience: str) -> str:
        credential = self._credential
        if hasattr(credential, "named_key"):
            name, key = credential.named_key
            return generate_sas_token(audience, name, key, int(time.time()) + TOKEN_TTL)
        if hasattr(credential, "signature"):
            return str(credential.signature)
        token = str(credential.get_token(JWT_SCOPE).token)
        return token if token.startswith("SharedAccessSignature") else f"Bearer {token}"

    def authorization(self) -> str:
        """The ``Authorization`` header, renewed a minute before it expires."""
        now = time.time()
        if self._token is None or self._token[1] - 60 <= now or not hasattr(self._credential, "named_key"):
            self._token = (self._token_for(f"https://{self.fully_qualified_namespace}"), now + TOKEN_TTL)
        return self._token[0]

    def headers(self, call: Call[Any]) -> dict[str, str]:
        headers = {"Authorization": self.authorization(), **call.headers}
        if call.body is not None:
            headers["Content-Type"] = _ATOM
        return headers

    def url_path(self, call: Call[Any]) -> str:
        if "?" in call.path:
            return call.path
        return f"{call.path}?api-version={self.api_version}"

    def result(self, call: Call[T], status: int, reason: str, body: bytes) -> T:
        """The call's value from its answer, or the error for it."""
        log.debug("management API: %s %s -> %d", call.method, call.path, status)
        if status >= 300:
            raise error_for_status(status, reason, _xml.error_detail(body), call.what)
        try:
            return call.read(body)
        except (ValueError, KeyError) as exc:
            raise HttpResponseError(
                f"{call.what}: the answer could not be read ({exc})", status_code=status, reason=reason
            ) from None

    def _full_path(self, entity: str | None) -> str | None:
        if not entity:
            return entity
        return entity if "://" in entity else f"sb://{self.fully_qualified_namespace}/{entity}"

    def _forward_headers(self, model: Any) -> dict[str, str]:
        """Service Bus asks for a token for the entity a ``ForwardTo`` names, as the SDK sends it."""
        headers = {}
        for attr, header in (
            ("forward_to", "ServiceBusSupplementaryAuthorization"),
            ("forward_dead_lettered_messages_to", "ServiceBusDlqSupplementaryAuthorization"),
        ):
            target = getattr(model, attr, None)
            if target:
                headers[header] = self._token_for(target)
        return headers

    # -- queues and topics ---------------------------------------------------------
    def get(self, kind: str, name: str, read: Callable[[ET.Element], T]) -> Call[T]:
        _check_name(name, f"{kind} name")
        return Call("GET", _path(name), f"{kind} {name!r}", _entry(read))

    def put(self, model: Any, update: bool, path: str, body: bytes, what: str) -> Call[Any]:
        headers = self._forward_headers(model)
        if update:
            headers["If-Match"] = "*"
        read: Callable[[bytes], Any] = _none
        if not update:
            if isinstance(model, QueueProperties):
                read = _entry(lambda e: _xml.read_properties(QueueProperties, e))
            elif isinstance(model, TopicProperties):
                read = _entry(lambda e: _xml.read_properties(TopicProperties, e))
            else:
                read = _entry(lambda e: _xml.read_properties(SubscriptionProperties, e))
        return Call("PUT", path, what, read, body, headers)

    def create_entity(self, model: QueueProperties | TopicProperties) -> Call[Any]:
        kind = "queue" if isinstance(model, QueueProperties) else "topic"
        _check_name(model.name, f"{kind} name")
        self._normalise_forwards(model)
        return self.put(model, False, _path(model.name), _xml.properties_entry(model), f"{kind} {model.name!r}")

    def update_entity(self, value: Any, cls: type[Any], overrides: Mapping[str, Any]) -> Call[None]:
        model = _model(value, cls, overrides)
        kind = "queue" if cls is QueueProperties else "topic"
        _check_name(model.name, f"{kind} name")
        self._normalise_forwards(model)
        return self.put(model, True, _path(model.name), _xml.properties_entry(model), f"{kind} {model.name!r}")

    def _normalise_forwards(self, model: Any) -> None:
        for attr in ("forward_to", "forward_dead_lettered_messages_to"):
            if hasattr(model, attr):
                setattr(model, attr, self._full_path(getattr(model, attr)))

    def delete(self, what: str, *names: str) -> Call[None]:
        for n in names:
            _check_name(n, "name")
        return Call("DELETE", _path(*names), what, _none)

    def list_page(
        self, listing: Listing[T], token: str | None, options: Mapping[str, Any]
    ) -> Call[tuple[list[T], str | None]]:
        """The page of ``listing`` that ``token`` names; the first by the SDK's ``start_index``
        and ``max_page_size`` keywords (``options``: what the ``list_*`` call was given)."""
        first = {k: int(options[k]) for k in ("start_index", "max_page_size") if options.get(k) is not None}
        return listing.page(token, self.api_version, **first)

    def list_entities(self, kind: str, read: Callable[[ET.Element], T]) -> Listing[T]:
        return Listing(f"/$Resources/{kind}", kind, read)

    # -- subscriptions ---------------------------------------------------------------
    def subscription_path(self, topic: str, sub: str) -> str:
        _check_name(topic, "topic name")
        _check_name(sub, "subscription name")
        return _path(topic, "Subscriptions", sub)

    def get_subscription(self, topic: str, sub: str, read: Callable[[ET.Element], T]) -> Call[T]:
        return Call("GET", self.subscription_path(topic, sub), _subscription_label(topic, sub), _entry(read))

    def create_subscription(
        self, topic: str, model: SubscriptionProperties, default_rule: RuleProperties | None
    ) -> Call[SubscriptionProperties]:
        path = self.subscription_path(topic, model.name)
        self._normalise_forwards(model)
        body = _xml.subscription_entry(model, default_rule)
        return self.put(model, False, path, body, _subscription_label(topic, model.name))

    def update_subscription(self, topic: str, value: Any, overrides: Mapping[str, Any]) -> Call[None]:
        model = _model(value, SubscriptionProperties, overrides)
        path = self.subscription_path(topic, model.name)
        self._normalise_forwards(model)
        body = _xml.subscription_entry(model, None)
        return self.put(model, True, path, body, _subscription_label(topic, model.name))

    def delete_subscription(self, topic: str, sub: str) -> Call[None]:
        return Call("DELETE", self.subscription_path(topic, sub), _subscription_label(topic, sub), _none)

    def list_subscriptions(self, topic: str, read: Callable[[ET.Element], T]) -> Listing[T]:
        _check_name(topic, "topic name")
        return Listing(_path(topic, "Subscriptions"), f"subscriptions of {topic!r}", read)

    # -- rules -----------------------------------------------------------------------
    def rule_path(self, topic: str, sub: str, rule: str) -> str:
        _check_name(rule, "rule name")
        return f"{self.subscription_path(topic, sub)}/Rules/{quote(rule, safe='$')}"

    def get_rule(self, topic: str, sub: str, rule: str) -> Call[RuleProperties]:
        return Call("GET", self.rule_path(topic, sub, rule), _rule_label(topic, sub, rule), _entry(_xml.read_rule))

    def put_rule(self, topic: str, sub: str, rule: RuleProperties, update: bool) -> Call[Any]:
        if rule.filter is not None and not isinstance(rule.filter, SqlRuleFilter | CorrelationRuleFilter):
            raise TypeError("filter must be a SqlRuleFilter, CorrelationRuleFilter, TrueRuleFilter or FalseRuleFilter")
        if rule.action is not None and not isinstance(rule.action, SqlRuleAction):
            raise TypeError("action must be a SqlRuleAction or None")
        headers = {"If-Match": "*"} if update else {}
        read: Callable[[bytes], Any] = _none if update else _entry(_xml.read_rule)
        path = self.rule_path(topic, sub, rule.name)
        return Call("PUT", path, _rule_label(topic, sub, rule.name), read, _xml.rule_entry(rule), headers)

    def create_rule(self, topic: str, sub: str, name: str, filter: Any, action: Any) -> Call[RuleProperties]:
        result: Call[RuleProperties] = self.put_rule(topic, sub, new_rule(name, filter, action), False)
        return result

    def update_rule(self, topic: str, sub: str, value: Any, overrides: Mapping[str, Any]) -> Call[None]:
        return self.put_rule(topic, sub, _model(value, RuleProperties, overrides), True)

    def delete_rule(self, topic: str, sub: str, rule: str) -> Call[None]:
        return Call("DELETE", self.rule_path(topic, sub, rule), _rule_label(topic, sub, rule), _none)

    def list_rules(self, topic: str, sub: str) -> Listing[RuleProperties]:
        path = self.subscription_path(topic, sub) + "/Rules"
        return Listing(path, f"rules of {topic}/{sub}", _xml.read_rule)

    # -- namespace -------------------------------------------------------------------
    def namespace(self) -> Call[NamespaceProperties]:
        return Call("GET", "/$namespaceinfo", "the namespace", _entry(_xml.namespace_properties))


def queue(entry: ET.Element) -> QueueProperties:
    return _xml.read_properties(QueueProperties, entry)


def queue_runtime(entry: ET.Element) -> QueueRuntimeProperties:
    return _xml.read_runtime(QueueRuntimeProperties, entry)


def topic(entry: ET.Element) -> TopicProperties:
    return _xml.read_properties(TopicProperties, entry)


def topic_runtime(entry: ET.Element) -> TopicRuntimeProperties:
    return _xml.read_runtime(TopicRuntimeProperties, entry)


def subscription(entry: ET.Element) -> SubscriptionProperties:
    return _xml.read_properties(SubscriptionProperties, entry)


def subscription_runtime(entry: ET.Element) -> SubscriptionRuntimeProperties:
    return _xml.read_runtime(SubscriptionRuntimeProperties, entry)


def new_rule(name: str, flt: Any, action: Any) -> RuleProperties:
    """The rule ``create_rule`` sends (a True filter when none is given, as the SDK's default)."""
    return RuleProperties(name, filter=TrueRuleFilter() if flt is None else flt, action=action, created_at_utc=None)


def ssl_context(connection_verify: str | bool | None) -> ssl.SSLContext:
    """The TLS context ``connection_verify`` asks for: a CA bundle path, ``False`` (no check) or the default."""
    if isinstance(connection_verify, str):
        try:
            return ssl.create_default_context(cafile=connection_verify)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"connection_verify: cannot read the CA bundle {connection_verify!r} ({exc})") from None
    context = ssl.create_default_context()
    if connection_verify is False:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def model_kwargs(cls: type[Any], name: str, kwargs: Mapping[str, Any], method: str) -> Any:
    """``cls(name, **kwargs)``; a keyword that is not a property of ``cls`` is a :class:`TypeError`."""
    known = [f.name for f in dataclasses.fields(cls) if f.name != "name"]
    for key in kwargs:
        if key not in known:
            raise TypeError(f"{method}() got an unexpected keyword argument {key!r}")
    return cls(name, **{key: kwargs.get(key) for key in known})
