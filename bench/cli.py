"""The command line as a user meets it: how long `jetwatch --help`, `check` and `status` take to
answer and how much memory each process peaks at, against the interpreter starting and doing
nothing (the floor every command pays), measured in the same run.

`check` runs every minute from Nagios-style schedulers, so it is timed on a store whose
collector judged `consumers` consumers (bench/fleet.py's synthetic history, judged once as the
collector judges a cycle).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.fleet import CURRENT, GENERATE
from bench.machine import print_header
from jetwatch.collectors.judging import judge_stored_cycle, load_window
from jetwatch.health.rules import Thresholds
from jetwatch.store.database import Store

# Started from a small interpreter of its own: a child forked from this process would count this
# process's memory in its peak until its exec.
_SPAWN = """
import os, sys, time
t = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ,
                     file_actions=[(os.POSIX_SPAWN_DUP2, os.open(os.devnull, os.O_WRONLY), fd) for fd in (1, 2)])
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - t, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status))
"""


def _run(argv: list[str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MiB and exit status of one process."""
    out = subprocess.run([sys.executable, "-S", "-c", _SPAWN, *argv], capture_output=True, text=True, check=True)
    wall, rss, code = out.stdout.split()
    return float(wall), float(rss), int(code)


def _store(path: Path, consumers: int) -> None:
    store = Store(path, query_timeout=600, lock_timeout=60)
    store.migrate()
    store.write(lambda con: (con.execute(GENERATE, {"rows": consumers * 12, "consumers": consumers}),
                             con.execute(CURRENT)))
    th = Thresholds()
    base = store.read(lambda con: con.execute("SELECT max(ts) FROM consumer_current").fetchall()[0][0])
    judge_stored_cycle(store, base, th, load_window(store, base, th))


def main(consumers: int, runs: int) -> None:
    print_header()
    jetwatch = [sys.executable, "-m", "jetwatch.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "cli.duckdb"
        _store(db, consumers)
        cases = {
            "python -c pass (the floor)": [sys.executable, "-c", "pass"],
            "jetwatch --help": [*jetwatch, "--help"],
            f"jetwatch check ({consumers:,} consumers)": [*jetwatch, "check", "--stale-after", "1d", "--db", str(db)],
            f"jetwatch status --json ({consumers:,} consumers)": [*jetwatch, "status", "--json", "--stale-after", "1d", "--db", str(db)],
        }
        medians: list[float] = []
        print(f"{'command':48} {'median s':>9} {'max s':>8} {'x floor':>8} {'peak RSS MiB':>13}")
        for name, argv in cases.items():
            _run(argv)  # warm the page cache and the bytecode
            got = [_run(argv) for _ in range(runs)]
            walls = sorted(g[0] for g in got)
            medians.append(statistics.median(walls))
            codes = sorted({g[2] for g in got})
            print(f"{name:48} {medians[-1]:9.3f} {walls[-1]:8.3f} {medians[-1] / medians[0]:8.1f} "
                  f"{max(g[1] for g in got):13.0f}  exit {','.join(map(str, codes))}")
        print(f"ratio to the interpreter's own start: --help {medians[1] / medians[0]:.1f}, check "
              f"{medians[2] / medians[0]:.1f}, status {medians[3] / medians[0]:.1f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--consumers", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args()
    main(a.consumers, a.runs)
