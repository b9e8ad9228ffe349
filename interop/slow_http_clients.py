"""Slow TLS clients against the broker's management port (issue 23, item 9).

    python3 interop/slow_http_clients.py [--clients 2000] [--handshake-timeout 5]
                                          [--reference /work/main]

The broker runs in a child process serving ``--http-port`` (its memory is its own).
This process opens ``--clients`` connections to that port, each finishing its TLS
handshake and then sending half a request head and nothing more, and waits until
``--handshake-timeout`` + 5 s. It prints the broker's resident memory before and at
its peak, how many clients got TLS, how many were closed by the broker, and how many
it still held at the end. With ``--reference DIR`` it runs the same against the
amqplink in DIR (say an older checkout) in the same run, side by side. Not a test:
the raw-socket tests are ``tests/broker/http/test_http_bounds.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import ssl
import subprocess
import sys
import time
from pathlib import Path

HOST = "127.0.0.1"  # never anything else
ROOT = Path(__file__).resolve().parent.parent


async def serve(handshake_timeout: float) -> None:
    from amqplink.broker import Broker

    broker = Broker(servicebus=True, http_port=0, handshake_timeout=handshake_timeout)
    await broker.start(HOST, 0)
    print(f"PORT {broker.http_port}", flush=True)
    try:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent goes
    finally:
        await broker.stop()


def start_broker(code: Path, handshake_timeout: float) -> tuple[subprocess.Popen[str], int]:
    command = [sys.executable, str(Path(__file__).resolve()), "--serve", "--handshake-timeout", str(handshake_timeout)]
    env = {**os.environ, "PYTHONPATH": str(code)}  # the broker imports amqplink from ``code``
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=code)
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line.startswith("PORT "):
        child.kill()
        raise SystemExit(f"the broker did not start (said {line!r})")
    return child, int(line.split()[1])


async def slow_client(port: int, context: ssl.SSLContext, until: float, tally: dict[str, int]) -> None:
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(HOST, port, ssl=context, server_hostname="localhost"), until - time.monotonic()
        )
    except (OSError, TimeoutError):
        tally["no TLS"] += 1
        return
    tally["TLS"] += 1
    writer.write(b"GET /$namespaceinfo HTTP/1.1\r\nHost: localhost\r\n")  # and never the end of the head
    try:
        while await asyncio.wait_for(reader.read(4096), until - time.monotonic()):
            pass
        tally["closed by the broker"] += 1
    except TimeoutError:
        tally["still held at the end"] += 1
    except OSError:
        tally["closed by the broker"] += 1
    finally:
        writer.transport.abort()


async def run(code: Path, clients: int, handshake_timeout: float) -> dict[str, float]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from interop.soak_broker import rss_mib

    child, port = start_broker(code, handshake_timeout)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    tally = {"TLS": 0, "no TLS": 0, "closed by the broker": 0, "still held at the end": 0}
    try:
        before = peak = rss_mib(child.pid)
        until = time.monotonic() + handshake_timeout + 5
        tasks = [asyncio.ensure_future(slow_client(port, context, until, tally)) for _ in range(clients)]
        while not all(t.done() for t in tasks):
            peak = max(peak, rss_mib(child.pid))
            await asyncio.wait(tasks, timeout=0.25)
    finally:
        child.kill()
        child.wait()
    return {"RSS before (MiB)": before, "RSS peak (MiB)": peak, **tally}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--handshake-timeout", type=float, default=5.0)
    parser.add_argument("--reference", type=Path, help="another amqplink tree to run the same against")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.handshake_timeout))
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 2 * args.clients + 256)), hard))
    runs = {"this tree": ROOT}
    if args.reference is not None:
        runs["reference"] = args.reference.resolve()
    results = {name: asyncio.run(run(code, args.clients, args.handshake_timeout)) for name, code in runs.items()}
    print(f"{args.clients} slow TLS clients, handshake_timeout {args.handshake_timeout} s, waited until +5 s")
    for key in next(iter(results.values())):
        print(f"  {key:24}" + "".join(f"{name}: {r[key]:>8.0f}   " for name, r in results.items()))


if __name__ == "__main__":
    main()
