"""The verdicts as a detector on a real server: the incident library (tests/incident_library.py)
with its healthy look-alikes going on for `--minutes` (30 by default) beside the incidents, on
one nats-server, judged by the real collector on its default settings; then the leader-change
scenarios on a three-node loopback cluster (R3 streams and consumers, a few minutes). Prints, per
incident, what it was named and how long after its start; per look-alike, the cycles judged and
every false alarm.

    python -m bench.incidents [--minutes 30]

The model of tests/consumer_model.py runs the same rules over longer histories in seconds:
`python -m bench.detector`.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from bench.machine import print_header
from jetwatch.core.embedded_server import NatsServer, cluster
from jetwatch.store.database import Store
from tests.helpers import rows
from tests.incident_library import INTERVAL, cluster_ready, judged, leader_changes, library, run_library


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long the look-alikes run")
    args = parser.parse_args()
    print_header()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(store_dir=Path(tmp) / "js").start()
        try:
            db = str(Path(tmp) / "jetwatch.duckdb")
            outcome = asyncio.run(run_library(server.url, db, "bench", library(), look_alikes_for=args.minutes * 60))
            cycles = rows(Store(db), "SELECT cycle FROM current_cycle", [])[0][0]
        finally:
            server.stop()
        nodes = cluster(Path(tmp) / "cluster")
        try:
            for node in nodes:
                node.start()
            urls = ",".join(n.url for n in nodes)
            asyncio.run(cluster_ready(urls, "BENCH_READY"))
            on_cluster = asyncio.run(run_library(urls, str(Path(tmp) / "cluster.duckdb"), "benchc", leader_changes(),
                                                 replicas=3))
        finally:
            for node in nodes:
                node.stop()
    tables = [(outcome, judged(outcome), ""), (on_cluster, judged(on_cluster), " (3-node cluster)")]
    print("\n| incident | expected | named | after | deadline | right | later in the run |\n|---|---|---|---|---|---|---|")
    for run, table, where in tables:
        for j in table:
            if j.expected != "-":
                s = run.scenarios[j.key]
                after = "-" if j.taken is None else f"{j.taken:.1f} s"
                print(f"| {s.name}{where} | {j.expected} | {j.expected if j.taken is not None else '-'} | {after} | "
                      f"{s.deadline:.0f} s | {'yes' if j.ok else 'NO'} | {' → '.join(j.later) or '-'} |")
    print(f"\n| look-alike ({args.minutes:g} minutes, {cycles} cycles at {INTERVAL:g} s; on the cluster, its "
          "scenario's run) | false alarms | verdicts raised |\n|---|---|---|")
    for run, table, where in tables:
        for j in table:
            if j.expected == "-":
                print(f"| {run.scenarios[j.key].name}{where} | {len(j.alarms)} | "
                      f"{', '.join(sorted(set(j.alarms))) or '-'} |")
    print(f"\n({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
