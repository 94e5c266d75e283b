"""Run every benchmark in turn with its defaults (`make bench`)."""

from __future__ import annotations

import subprocess
import sys

for name in ("collect", "store_writes", "fleet", "verdicts", "pipeline"):
    print(f"== bench.{name}", flush=True)
    subprocess.run([sys.executable, "-m", f"bench.{name}"], check=True)
