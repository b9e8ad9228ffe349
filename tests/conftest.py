"""Shared test plumbing: the test tiers, the peers they need, the Hypothesis profile,
and ``async def`` tests on a fresh event loop each.

Tiers (docs/architecture.md#tests-in-tiers): a test marked ``interop``, ``sdk``,
``spark``, ``slow`` or ``fuzz`` is outside the fast tier. ``pytest`` with no paths runs
the fast tier; ``--full`` (or ``CI=true``) runs everything; ``-m EXPR`` or naming files
or directories runs what was asked. Markers come from the test itself or, here, from
what it needs: a module or test function that imports ``azure`` is ``sdk``, ``proton``
is ``interop``, ``pyspark`` is ``spark``; a scenario run with the official client (a
parameter ``"azure"``) is ``sdk``; everything under ``tests/interop/`` is ``interop``;
the modules in :data:`SLOW_MODULES` are ``slow``.

Peers (:mod:`tests.peers`) are probed once per run: missing in the fast tier, a test
is skipped with the reason and the install command; in a full run it fails.

A test leaves no process running (:mod:`tests.processes`); ``python_sigint`` gives a test
Python's own Ctrl-C handler whatever the run was started with.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
import inspect
import os
import signal
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from amqplink.broker import Broker
from tests import processes
from tests.peers import PEERS, Peers

TIERS = ("interop", "sdk", "spark", "slow", "fuzz")
"""The markers outside the fast tier."""

TESTS = Path(__file__).resolve().parent

IMPORT_TIERS = {"azure": ("sdk", "azure-servicebus"), "proton": ("interop", "proton"), "pyspark": ("spark", "pyspark")}
"""Top-level package imported -> (marker, peer)."""

MARK_PEERS = {"sdk": "azure-servicebus", "spark": "pyspark"}
"""A marker given by hand -> the peer it implies."""

PARAM_TIERS = {"azure": "sdk"}
"""A parameter value -> the marker of the test run with it (``tests/servicebus/scenario.py``'s clients)."""

SLOW_MODULES = {
    "broker/test_cli_broker.py",
    "broker/test_cli_broker_fault.py",
    "broker/test_security_process.py",
    "interop/test_bench_broker_smoke.py",
    "interop/test_benchmark_scripts.py",
    "interop/test_soak_smoke.py",
    "test_cli_broker.py",
}
"""Modules (relative to tests/) whose tests take minutes of CPU, or each start ``amqplink``
as a process (seconds apiece), and need no peer."""

_PEERS_KEY = pytest.StashKey[Peers]()
_PROFILE_KEY = pytest.StashKey[str]()
_CHILDREN_KEY = pytest.StashKey[tuple[frozenset[int], int]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        help="run every tier (interop, sdk, spark, slow, fuzz); a missing peer fails instead of skipping",
    )


def _full(config: pytest.Config) -> bool:
    return bool(config.getoption("full")) or os.environ.get("CI", "").lower() in ("true", "1")


def pytest_configure(config: pytest.Config) -> None:
    full = _full(config)
    if full:
        os.environ.setdefault("HYPOTHESIS_PROFILE", "ci")
    from tests import profiles  # after the variable is set: it loads the profile

    config.stash[_PEERS_KEY] = Peers(full=full)
    config.stash[_PROFILE_KEY] = profiles.PROFILE


def pytest_report_header(config: pytest.Config) -> str:
    tier = "full (every tier)" if _full(config) else "fast (see --full)"
    return f"amqplink tiers: {tier}; hypothesis profile: {config.stash[_PROFILE_KEY]}"


def _roots(nodes: Iterable[ast.AST]) -> frozenset[str]:
    """The top-level packages imported (absolutely) anywhere inside ``nodes``."""
    found: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                found.update(alias.name.split(".")[0] for alias in sub.names)
            elif isinstance(sub, ast.ImportFrom) and sub.module and not sub.level:
                found.add(sub.module.split(".")[0])
    return frozenset(found)


@functools.cache
def _imports(path: Path) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """The packages ``path`` imports at module level, and those each test function (a
    function of the module or a method of its classes, with what it nests) imports."""
    tree = ast.parse(path.read_text(), str(path))
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    module_level = _roots(n for n in tree.body if not isinstance(n, defs))
    tops = [*tree.body, *(n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body)]
    functions = {n.name: _roots([n]) for n in tops if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    return module_level, functions


def _needs(item: pytest.Item) -> tuple[set[str], set[str]]:
    """The tier markers and peers ``item`` needs, from its path, imports and parameters."""
    marks: set[str] = set()
    peers: set[str] = set()
    path = Path(str(item.path))
    try:
        rel = path.relative_to(TESTS).as_posix()
    except ValueError:
        return marks, peers
    if rel.startswith("interop/"):
        marks.add("interop")
    if rel in SLOW_MODULES:
        marks.add("slow")
    module_imports, function_imports = _imports(path)
    function = getattr(item, "originalname", item.name)
    for package in module_imports | function_imports.get(function, frozenset()):
        if package in IMPORT_TIERS:
            mark, peer = IMPORT_TIERS[package]
            marks.add(mark)
            peers.add(peer)
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for value in callspec.params.values():
            if isinstance(value, str) and value in PARAM_TIERS:
                marks.add(PARAM_TIERS[value])
                peers.add("azure-servicebus")
    return marks, peers


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        marks, _ = _needs(item)
        for mark in sorted(marks - {m.name for m in item.iter_markers()}):
            item.add_marker(mark)
    if _full(config) or config.getoption("markexpr") or config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return  # every tier, or what the command line selected
    fast: list[pytest.Item] = []
    other: list[pytest.Item] = []
    for item in items:
        (other if any(item.get_closest_marker(tier) for tier in TIERS) else fast).append(item)
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = fast


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (fast tier) or fail (full run) before any fixture starts, if a peer is missing."""
    peers = item.config.stash[_PEERS_KEY]
    _, needed = _needs(item)
    needed |= {str(mark.args[0]) for mark in item.iter_markers("peer")}
    needed |= {MARK_PEERS[mark.name] for mark in item.iter_markers() if mark.name in MARK_PEERS}
    for name in sorted(needed):
        if name not in PEERS:
            pytest.fail(f"unknown peer {name!r}; tests/peers.py knows {sorted(PEERS)}", pytrace=False)
        peers.require(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    item.stash[_CHILDREN_KEY] = (processes.children(), processes.now_ticks())
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """A test leaves no process running: a child it started that is still alive once its
    fixtures are torn down is killed, and the test errors naming it. (Children of
    fixtures wider than the test, such as a module's peer broker, started before it ran.)"""
    try:
        result = yield
    finally:
        before = item.stash.get(_CHILDREN_KEY, None)
        left = sorted(processes.started_since(processes.children() - before[0], before[1])) if before else []
        named = [processes.describe(pid) for pid in left]
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if named:
        pytest.fail(f"the test left {len(named)} process(es) running, killed now: {'; '.join(named)}", pytrace=False)
    return result


@pytest.fixture()
def python_sigint() -> Iterator[None]:
    """Python's own SIGINT handler (``KeyboardInterrupt``) for the test, as a program started
    from a terminal has it, whatever the run was started with (a background job inherits
    SIGINT ignored, and amqplink leaves an ignored SIGINT alone); put back afterwards."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def peer(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``peer(name)``: skip (fast tier) or fail (full run) unless that peer of tests/peers.py is present."""
    return request.config.stash[_PEERS_KEY].require


class _ImportGuard(pytest.Module):
    """A test module whose module-level imports need a missing package is skipped (fast
    tier) or fails (full run) with the install command, instead of an ImportError."""

    def _getobj(self) -> Any:
        module_imports, _ = _imports(Path(str(self.path)))
        peers = self.config.stash[_PEERS_KEY]
        for package in sorted(module_imports & set(IMPORT_TIERS)):
            peer = IMPORT_TIERS[package][1]
            if not peers.present(peer):
                if peers.full:
                    raise self.CollectError(peers.missing_reason(peer))
                pytest.skip(peers.missing_reason(peer), allow_module_level=True)
        return super()._getobj()


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if module_path.name.startswith("test_"):
        return _ImportGuard.from_parent(parent, path=module_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run coroutine test functions with ``asyncio.run`` (no plugin needed)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs: dict[str, Any] = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), timeout=120))
    return True


@contextmanager
def broker_thread(broker: Broker, ssl_context: ssl.SSLContext | None = None) -> Iterator[Broker]:
    """Run ``broker`` on an event loop of its own, in a thread (for blocking clients); TLS on its
    AMQP port with ``ssl_context``."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="embedded-broker", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(broker.start(ssl_context=ssl_context), loop).result(10)
    try:
        yield broker
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture()
def embedded_broker() -> Iterator[Broker]:
    """The embedded broker on an event loop of its own, in a thread (for blocking clients)."""
    with broker_thread(Broker()) as broker:
        yield broker
