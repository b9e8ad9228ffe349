"""``amqplink spark-package``: a zip that a Python without amqplink imports it from, and in
which Spark's lookup of ``pyspark_*`` modules finds ``pyspark_servicebus`` (fast tier)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from amqplink.spark.package import build_zip
from tests.spark.conftest import ROOT

CHECK = """
import os, pkgutil, sys
sys.path[:] = [p for p in sys.path if not (os.path.isdir(p) and os.path.exists(os.path.join(p, "amqplink")))]
sys.path.insert(0, sys.argv[1])
import amqplink.spark.columns
print(amqplink.__file__)
print(sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_servicebus")))
"""


def test_the_zip_holds_the_package_and_the_lookup_module_and_imports_from_itself(tmp_path: Path) -> None:
    package = build_zip(tmp_path / "a.zip")
    names = zipfile.ZipFile(package.path).namelist()
    assert "amqplink/__init__.py" in names and "amqplink/spark/datasource.py" in names
    assert "pyspark_servicebus.py" in names and "amqplink/py.typed" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert package.files == len(names)
    done = subprocess.run([sys.executable, "-c", CHECK, str(package.path)], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, "PYTHONPATH": ""})  # fmt: skip
    assert done.returncode == 0, done.stderr
    where, found = done.stdout.splitlines()
    assert where.startswith(str(package.path)) and found == "['pyspark_servicebus']"


def test_the_command_writes_the_zip_and_says_how_to_ship_it(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-m", "amqplink.cli", "spark-package", "-o", str(tmp_path / "z.zip"),
                           "--json"], capture_output=True, text=True, timeout=120, check=False, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["zip"] == str(tmp_path / "z.zip") and (tmp_path / "z.zip").exists()
    done = subprocess.run([sys.executable, "-m", "amqplink.cli", "spark-package", "-o", str(tmp_path / "y.zip")],
                          capture_output=True, text=True, timeout=120, check=False, env=env)  # fmt: skip
    assert done.returncode == 0 and f"--py-files {tmp_path / 'y.zip'}" in done.stdout
    assert "pandas<3" in done.stderr and "--archives" in done.stdout
