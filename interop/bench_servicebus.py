"""The Service Bus client benchmark's old name: runs :mod:`interop.bench_sbclient` (see there).

python3 interop/bench_servicebus.py [--count 10000] [--single-count 5000] [--size 1024]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from interop.bench_sbclient import main

if __name__ == "__main__":
    sys.exit(main())
