"""Run every benchmark in turn with its defaults (`make bench`)."""

from __future__ import annotations

import subprocess
import sys

for name in ("detector", "collect", "lag", "store_writes", "fleet", "verdicts", "pipeline", "scale", "consumer_page", "fleet_page", "fleet_clusters"):
    print(f"== bench.{name}", flush=True)
    subprocess.run([sys.executable, "-m", f"bench.{name}"], check=True)
