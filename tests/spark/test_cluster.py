"""A standalone Spark cluster (a master and a worker process on 127.0.0.1) whose executors'
Python lacks amqplink: without the zip, one clear error; with ``amqplink spark-package``'s
zip on ``--py-files``, the sink and the source work there (found by Spark itself), through an
executor killed mid-task (0 rows lost, 0 twice)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.spark.package import build_zip
from tests.spark.conftest import ROOT, drain, new_queue

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NO_AMQPLINK = """
import os, runpy, sys
# An executor's Python without amqplink: every path entry that holds it goes (a .pth's checkout,
# PYTHONPATH's), except zips, which is how --py-files ships it.
def holds(entry):
    return os.path.isdir(entry) and any(
        os.path.exists(os.path.join(entry, name)) for name in ("amqplink/__init__.py", "pyspark_servicebus.py"))
sys.path[:] = [entry for entry in sys.path if not holds(entry)]
if sys.argv[1] == "-m":
    module, sys.argv = sys.argv[2], [sys.argv[0], *sys.argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
else:
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _wait_for(path: Path, text: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        assert process.poll() is None, path.read_text(errors="replace")[-3000:]
        time.sleep(0.2)  # polling the daemon's log (a condition, with a deadline)
    raise AssertionError(f"no {text!r} in {path} after {seconds} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``spark://127.0.0.1:PORT``: a master and a worker (2 cores) in process groups of their own."""
    where = tmp_path_factory.mktemp("cluster")
    home = _spark_home()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYTHONPATH", None)
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    started: list[subprocess.Popen[bytes]] = []

    def daemon(name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = where / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        started.append(process)
        return process, log

    try:
        master, master_log = daemon("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                    "--port", str(port), "--webui-port", str(_free_port()))  # fmt: skip
        _wait_for(master_log, "I have been elected leader", master, 180)
        work = where / "work"
        worker, worker_log = daemon("worker", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                    "--cores", "2", "--memory", "2g", "--work-dir", str(work),
                                    "--webui-port", str(_free_port()), url)  # fmt: skip
        _wait_for(worker_log, "Successfully registered with master", worker, 180)
        python = where / "python-without-amqplink"
        (where / "no_amqplink.py").write_text(NO_AMQPLINK)
        python.write_text(f'#!/bin/sh\nexec {sys.executable} {where / "no_amqplink.py"} "$@"\n')
        python.chmod(0o755)
        yield {"url": url, "home": home, "work": work, "python": python, "where": where}
    finally:
        for process in reversed(started):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)


def _submit(cluster: dict[str, Any], *args: str, py_files: Path | None) -> subprocess.Popen[str]:
    command = [str(cluster["home"] / "bin" / "spark-submit"), "--master", cluster["url"],
               "--conf", f"spark.pyspark.python={cluster['python']}",
               "--conf", f"spark.pyspark.driver.python={sys.executable}",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.task.maxFailures=4",
               "--executor-memory", "1g", "--total-executor-cores", "2"]  # fmt: skip
    if py_files is not None:
        command += ["--py-files", str(py_files)]
    command += [str(Path(ROOT) / "tests" / "spark" / "cluster_job.py"), *args]
    env = {**os.environ, "SPARK_HOME": str(cluster["home"]), "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": ROOT}
    return subprocess.Popen(command, env=env, cwd=str(cluster["where"]), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip


def test_executors_without_amqplink_are_told_what_to_ship(cluster: dict[str, Any]) -> None:
    job = _submit(cluster, "check", py_files=None)
    out, err = job.communicate(timeout=400)  # (spark-submit passes the Python driver's stderr to its stdout)
    assert job.returncode == 2, err[-3000:]
    ours = [line for line in (out + err).splitlines() if line.startswith("ExecutorImportError:")]
    assert len(ours) == 1, (out + err)[-3000:]
    assert "the executors' Python" in ours[0] and "cannot import amqplink" in ours[0]
    assert "amqplink spark-package" in ours[0] and "--py-files" in ours[0] and "--archives" in ours[0]


def _executors(work: Path) -> list[int]:
    """The pids of the executor JVMs the worker started (their working directory is under ``work``)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if b"CoarseGrainedExecutorBackend" in cmdline and cwd.startswith(str(work)):
            found.append(int(pid))
    return found


def test_with_the_zip_the_sink_and_the_source_run_on_the_cluster_through_an_executor_kill(
    cluster: dict[str, Any], sb_broker: Broker
) -> None:
    package = build_zip(cluster["where"] / "amqplink-spark.zip")
    first, second = new_queue(sb_broker), new_queue(sb_broker, dedup=True)
    marker = cluster["where"] / "held"
    checkpoint = cluster["where"] / "checkpoint"
    job = _submit(cluster, "write-read", sb_broker.connection_string, first, second, str(checkpoint), str(marker),
                  py_files=package.path)  # fmt: skip
    try:
        deadline = time.monotonic() + 400
        while not marker.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # polling for the marker (a condition, with a deadline)
        if not marker.exists():
            out, err = job.communicate(timeout=60)
            (cluster["where"] / "job.log").write_text(out + "\n----\n" + err)
            raise AssertionError(f"the job ended before its task was held:\n{out[-4000:]}\n{err[-2000:]}")
        executors = _executors(cluster["work"])
        assert len(executors) == 1
        os.kill(executors[0], signal.SIGKILL)  # mid-task: the worker starts another executor
        _, err = job.communicate(timeout=600)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 0, err[-4000:]
    got = Counter(str(m) for m in drain(sb_broker, second))
    assert set(got) == {str(i) for i in range(3000)}  # lost: 0
    assert set(got.values()) == {1}  # delivered twice: 0
    assert drain(sb_broker, first, idle=0.5) == []
