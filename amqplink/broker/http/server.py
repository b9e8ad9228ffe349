"""The Service Bus management REST API over HTTPS, served by aiohttp beside the AMQP port.

One listener serves every namespace of the broker, each under its own host name, as Service
Bus serves each namespace at ``https://NAME.servicebus.windows.net/``: the request's ``Host``
header chooses the namespace by the rule the AMQP port applies to the open's ``hostname``
(``route``, given by the broker: :meth:`amqplink.broker.sbserver.ServiceBusHost.route`), and
any other name gets the first. The path never names the namespace. What each namespace
answers is :class:`~.resources.NamespaceApi`'s (routes, authorization with that namespace's
own keys and names); this module maps errors to answers and bounds the listener
(:mod:`.bounds`), and carries AMQP over WebSockets (:mod:`.websocket`) when given the AMQP
port's acceptor.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from amqplink.aio.server import ServerLimits, ServerProtocol
from amqplink.broker.config import DEFAULT_IDLE_TIMEOUT
from amqplink.broker.http.bounds import BoundedListener, request_deadline
from amqplink.broker.http.resources import MAX_BODY, MAX_PAGE, ApiError, NamespaceApi, error_response
from amqplink.broker.http.websocket import AmqpWebSockets
from amqplink.broker.namespace.errors import NOT_FOUND, RESOURCE_LIMIT_EXCEEDED, EntityError
from amqplink.broker.namespace.namespace import Namespace

__all__ = ["MAX_BODY", "MAX_PAGE", "ManagementApi", "NamespaceApi"]

log = logging.getLogger(__name__)


class ManagementApi:
    """The management API of the namespaces in ``apis`` (the first: the default one); :meth:`start`
    serves it over HTTPS. ``route`` maps a ``Host`` header to the namespace it names (None: the first)."""

    def __init__(
        self,
        apis: Sequence[NamespaceApi],
        *,
        route: Callable[[str], Namespace] | None = None,
        max_body: int = MAX_BODY,
        amqp: Callable[[], ServerProtocol] | None = None,
    ) -> None:
        if not apis:
            raise ValueError("the management API serves at least one namespace")
        self.apis = list(apis)
        self._route = route
        self.max_body = max_body
        self._runner: web.AppRunner | None = None
        self.listener: BoundedListener | None = None
        """Admits connections and bounds what each holds (:mod:`.bounds`), once started."""
        self.websockets = None if amqp is None else AmqpWebSockets(amqp)
        """AMQP over WebSockets (:mod:`.websocket`), when given the AMQP port's acceptor (``amqp``)."""
        websockets = [] if self.websockets is None else [self.websockets.middleware]
        self.app = web.Application(
            client_max_size=max_body, middlewares=[request_deadline, *websockets, self._middleware]
        )
        self.app.router.add_route("*", "/{path:.*}", self._serve)

    @property
    def namespace(self) -> Namespace:
        """The first (default) namespace."""
        return self.apis[0].namespace

    def api_for(self, host: str) -> NamespaceApi:
        """The namespace a request's ``Host`` header names (the first when it names none)."""
        if self._route is not None:
            chosen = self._route(host)
            for api in self.apis:
                if api.namespace is chosen:
                    return api
        return self.apis[0]

    # -- serving ------------------------------------------------------------------
    async def start(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        *,
        limits: ServerLimits | None = None,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        """Listen on ``host:port`` (0: any free port), TLS when ``ssl_context`` is given,
        with the AMQP port's bounds (``limits``, ``idle_timeout``; :mod:`.bounds`)."""
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        assert self._runner.server is not None
        self.listener = BoundedListener(self._runner.server, limits or ServerLimits(), idle_timeout, ssl_context)
        await self.listener.start(host, port)

    @property
    def port(self) -> int:
        """The TCP port it listens on (after :meth:`start`)."""
        if self.listener is None:
            raise RuntimeError("the management API is not started")
        return self.listener.port

    async def stop(self) -> None:
        """Close the WebSocket connections and the listener, then the web application."""
        if self.websockets is not None:
            self.websockets.close_all()
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        api = self.api_for(request.host)
        api.authorize(request)
        return await api.dispatch(request)

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            if exc.status >= 500:
                log.error("management API: %s %s failed: %s", request.method, request.path, exc.detail)
            return error_response(exc.status, exc.detail)
        except EntityError as exc:
            status = 404 if exc.condition == NOT_FOUND else 403 if exc.condition == RESOURCE_LIMIT_EXCEEDED else 400
            return error_response(status, exc.description)
        except web.HTTPRequestEntityTooLarge:
            return error_response(413, f"the request body is larger than {self.max_body} bytes")
        except web.HTTPException as exc:
            return error_response(exc.status, exc.reason)
