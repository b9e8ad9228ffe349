"""A pytest plugin that runs azure-servicebus's own tests against the embedded broker.

The SDK's tests import ``devtools_testutils`` (the Azure SDK's test tooling, from the
azure-sdk-for-python repository's ``eng/tools/azure-sdk-tools``; not on PyPI) and, through
``servicebus_preparer``, the ARM clients ``azure-mgmt-resource`` and ``azure-mgmt-servicebus``.
Run live without recording (``AZURE_TEST_RUN_LIVE=true``, ``AZURE_SKIP_LIVE_RECORDING=true``),
that tooling makes no call to the test proxy: ``recorded_by_proxy`` calls the test with the
keywords its signature takes, the sanitizers and matchers return at once, the ``test_proxy``
fixture yields, and ``PowerShellPreparer`` hands the test the ``SERVICEBUS_*`` values of the
environment. This module provides exactly that behaviour under the same names (nothing else of
the tooling is used by the management tests), with the values of a broker it starts:

* ``servicebus_connection_str``, ``servicebus_fully_qualified_namespace``
  (``sbemulatorns.servicebus.windows.net``, as a namespace on Azure: the tests expect that suffix
  and the default port in the entity paths they read back), ``servicebus_sas_policy``/
  ``servicebus_sas_key`` (the emulator's key). The SDK's HTTPS transports reach that name
  straight: ``sbemulatorns.servicebus.windows.net:443`` resolves to the broker's HTTPS port (the
  ``getaddrinfo`` below; no proxy variable is set, so a test that names another host meets DNS as
  against Azure); the broker's certificate names the host, and the broker accepts tokens for it
  (``host_names``);
* ``get_credential()``: live, the tooling gives a Microsoft Entra ID credential, which the broker
  cannot verify (docs/dropin.md); here the SDK's own ``ServiceBusSharedKeyCredential`` with the
  broker's key, which the SDK's admin client signs SAS tokens with;
* TLS trust: the broker's self-signed certificate is made before anything imports aiohttp (whose
  default TLS context is made at import) and named by ``SSL_CERT_FILE`` and ``REQUESTS_CA_BUNDLE``,
  which the SDK's two transports (aiohttp, requests) read.

For the data-plane tests (``tests/*.py``, ``tests/async_tests``), beside that:

* ``servicebus_preparer``: :mod:`.preparers`, entities made on the broker instead of through ARM;
* the AMQP port: the SDK connects to ``NAMESPACE:5671`` with TLS. The broker listens with TLS (the
  same certificate) and the name and port resolve to it: ``socket.getaddrinfo`` answers for that
  one name and port with the broker's address (what DNS and a port forward would do; every other
  name is resolved as usual);
* trust: the SDK's AMQP transports trust ``certifi.where()`` unless given ``connection_verify``,
  so that names a bundle of certifi's roots and the broker's certificate (as a machine whose
  trust store holds the broker's CA).

``async def`` tests run with ``asyncio.run`` (the repository's own hook; no pytest-asyncio).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import socket
import ssl
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from amqplink.broker.http.tls import self_signed  # before aiohttp is imported: see the module
from tests.conftest import broker_thread, pytest_pyfunc_call  # noqa: F401  (the hook runs async tests)
from tests.servicebus.sdk_suite import preparers

KEY_NAME, KEY = "RootManageSharedAccessKey", "SAS_KEY_VALUE"
NAMESPACE = "sbemulatorns.servicebus.windows.net"
CERTIFICATE = self_signed(names=[NAMESPACE])
os.environ["SSL_CERT_FILE"] = os.environ["REQUESTS_CA_BUNDLE"] = CERTIFICATE.cert_path
os.environ.setdefault("AZURE_TEST_RUN_LIVE", "true")
os.environ.setdefault("AZURE_SKIP_LIVE_RECORDING", "true")

VALUES: dict[str, str] = {}
"""What ``PowerShellPreparer`` hands the tests (set when the broker has started)."""


def _accepted(func: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords ``func`` takes (all of them when it has ``**kwargs``), as the tooling trims them."""
    params = inspect.signature(func).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def recorded_by_proxy(func: Callable[..., Any]) -> Callable[..., Any]:
    """Live, not recording: the test itself."""

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **_accepted(func, kwargs))

    return run


def recorded_by_proxy_async(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    async def run(*args: Any, **kwargs: Any) -> Any:
        return await func(*args, **_accepted(func, kwargs))

    return run


def power_shell_preparer(name_prefix: str, **defaults: str) -> Callable[[], Callable[..., Any]]:
    """``PowerShellPreparer(prefix, key=fake...)()``: the test gets each key's live value."""

    def preparer(**options: Any) -> Callable[..., Any]:
        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            def values() -> dict[str, str]:
                return {key: VALUES.get(key, fake) for key, fake in defaults.items()}

            if inspect.iscoroutinefunction(func):

                @functools.wraps(func)
                async def run_async(*args: Any, **kwargs: Any) -> Any:
                    return await func(*args, **values(), **kwargs)

                wrapped: Callable[..., Any] = run_async
            else:

                @functools.wraps(func)
                def run(*args: Any, **kwargs: Any) -> Any:
                    return func(*args, **values(), **kwargs)

                wrapped = run
            # pytest must not take the injected keywords for fixtures: only ``self`` is left
            signature = inspect.signature(func)
            wrapped.__signature__ = signature.replace(  # type: ignore[attr-defined]
                parameters=[p for p in signature.parameters.values() if p.name == "self"]
            )
            return wrapped

        return decorate

    return preparer


def get_credential(is_async: bool = False, **kwargs: Any) -> Any:
    """The SDK's SAS credential with the broker's key (live: an Entra ID credential; see the module)."""
    if is_async:
        from azure.servicebus.aio._base_handler_async import ServiceBusSharedKeyCredential as AsyncKey

        return AsyncKey(VALUES["servicebus_sas_policy"], VALUES["servicebus_sas_key"])
    from azure.servicebus._base_handler import ServiceBusSharedKeyCredential

    return ServiceBusSharedKeyCredential(VALUES["servicebus_sas_policy"], VALUES["servicebus_sas_key"])


class AzureMgmtRecordedTestCase:
    """The tests' base class; live, it adds nothing they use but ``await_prepared_test``."""

    @staticmethod
    def await_prepared_test(func: Callable[..., Any]) -> Callable[..., Any]:
        """An ``async def`` test run to its end by a plain function (for tests without preparers)."""

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            return asyncio.run(func(*args, **_accepted(func, kwargs)))

        return run


def _nothing(*args: Any, **kwargs: Any) -> None:
    """A sanitizer or matcher: live and not recording, the tooling sends nothing."""


def _module(name: str, **names: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(names)
    sys.modules[name] = module
    return module


_module(
    "devtools_testutils",
    AzureMgmtRecordedTestCase=AzureMgmtRecordedTestCase,
    AzureRecordedTestCase=AzureMgmtRecordedTestCase,
    CachedResourceGroupPreparer=lambda *args, **kwargs: lambda func: func,
    RandomNameResourceGroupPreparer=preparers.ResourceGroupPreparer,
    PowerShellPreparer=lambda name_prefix, **defaults: power_shell_preparer(name_prefix, **defaults)(),
    get_credential=get_credential,
    recorded_by_proxy=recorded_by_proxy,
    set_custom_default_matcher=_nothing,
    aio=_module("devtools_testutils.aio", recorded_by_proxy_async=recorded_by_proxy_async),
    sanitizers=_module(
        "devtools_testutils.sanitizers",
        add_general_regex_sanitizer=_nothing,
        add_oauth_response_sanitizer=_nothing,
        add_remove_header_sanitizer=_nothing,
    ),
)
# azure-common (a package of the old SDKs): test_sb_client imports two error classes it never raises
_module("azure.common", AzureHttpError=type("AzureHttpError", (Exception,), {}),
        AzureConflictHttpError=type("AzureConflictHttpError", (Exception,), {}))  # fmt: skip
# the management tests take only SERVICEBUS_ENDPOINT_SUFFIX from it, the data-plane tests the preparers
preparers.install()

AMQPS_PORT = 5671
"""Where the SDK's AMQP transports connect (``TransportType.Amqp`` with TLS, the only way it has)."""
HTTPS_PORT = 443
"""Where the management API and AMQP over websockets (``TransportType.AmqpOverWebsocket``) are."""

RULES = {
    frozenset({"Listen"}): ("listenonly", "bGlzdGVuIG9ubHkga2V5IGZvciB0ZXN0cw=="),
    frozenset({"Send"}): ("sendonly", "c2VuZCBvbmx5IGtleSBmb3IgdGhlIHRlc3Rz"),
    frozenset({"Manage", "Send", "Listen"}): ("managesendlisten", "bWFuYWdlIHNlbmQgbGlzdGVuIGtleSB0ZXN0"),
}
"""The namespace rules the SDK's tests ask for (``ServiceBusNamespaceAuthorizationRulePreparer``)."""

_REDIRECT: dict[tuple[str, int], tuple[str, int]] = {}
_resolve = socket.getaddrinfo


def _getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    """``socket.getaddrinfo``, but the namespace's AMQP port is the broker's (see the module)."""
    try:
        target = _REDIRECT.get((str(host).lower(), int(port)))
    except (TypeError, ValueError):
        target = None
    if target is not None:
        host, port = target
    return _resolve(host, port, *args, **kwargs)


def _trust_bundle() -> str:
    """A CA bundle: certifi's roots and the broker's certificate."""
    import certifi

    with (
        tempfile.NamedTemporaryFile("w", suffix=".pem", prefix="sdk-trust-", delete=False) as bundle,
        open(certifi.where()) as roots,
        open(CERTIFICATE.cert_path) as ours,
    ):
        bundle.write(roots.read() + "\n" + ours.read())
    return bundle.name


@pytest.fixture(scope="session")
def test_proxy() -> Iterator[None]:
    """Live and not recording: no proxy is started."""
    yield


_running: list[AbstractContextManager[Any]] = []


def pytest_configure(config: pytest.Config) -> None:
    import certifi

    from amqplink.broker import Broker
    from amqplink.broker.rights import AccessRule, parse_rights

    broker = Broker(
        None,
        servicebus=True,
        http_port=0,
        http_cert=(CERTIFICATE.cert_path, CERTIFICATE.key_path),
        host_names=[NAMESPACE],
        keys={KEY_NAME: KEY},
        rules=[AccessRule(name, (key,), parse_rights(rights)) for rights, (name, key) in RULES.items()],
    )
    assert broker.servicebus is not None
    broker.servicebus.namespace.auto_create = False  # as a namespace on Azure (--strict-entities)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(CERTIFICATE.cert_path, CERTIFICATE.key_path)
    running = broker_thread(broker, ssl_context=tls)
    running.__enter__()
    _running.append(running)
    for name in ("HTTPS_PROXY", "https_proxy"):
        os.environ.pop(name, None)
    _REDIRECT[(NAMESPACE, AMQPS_PORT)] = ("127.0.0.1", broker.port)
    # HTTPS (the management API; AMQP over websockets, wss://NAMESPACE:443/$servicebus/websocket):
    # the broker's HTTPS port, connected to straight (no proxy variable is left for any transport)
    _REDIRECT[(NAMESPACE, HTTPS_PORT)] = ("127.0.0.1", broker.http_port)
    socket.getaddrinfo = _getaddrinfo
    trust = _trust_bundle()
    certifi.where = lambda: trust
    VALUES.update(
        servicebus_connection_str=f"Endpoint=sb://{NAMESPACE}/;SharedAccessKeyName={KEY_NAME};SharedAccessKey={KEY}",
        servicebus_fully_qualified_namespace=NAMESPACE,
        servicebus_sas_policy=KEY_NAME,
        servicebus_sas_key=KEY,
    )
    preparers.VALUES.update(
        connection_str=VALUES["servicebus_connection_str"],
        key_name=KEY_NAME,
        key=KEY,
        rules=RULES,
        admin=_admin_client,
    )


def _admin_client() -> Any:
    """The SDK's administration client on the broker's REST API (NAMESPACE:443 resolving to it), as ARM stands in."""
    from azure.servicebus.management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient.from_connection_string(VALUES["servicebus_connection_str"])


def pytest_unconfigure(config: pytest.Config) -> None:
    while _running:
        _running.pop().__exit__(None, None, None)
    CERTIFICATE.remove()
