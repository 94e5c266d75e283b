"""Run every benchmark in turn with its defaults (`make bench`), then write what they printed to
docs/benchmarks.md (bench/report.py), replacing the page whole. A bench that fails stops the run
and leaves the page as it was: it always shows one complete run. Benches named on the command
line run alone, and their table is printed, not written."""

from __future__ import annotations

import subprocess
import sys

from bench import report

BENCHES = ("detector", "collect", "lag", "store_writes", "fleet", "verdicts", "pipeline", "scale", "consumer_page",
           "fleet_page", "fleet_clusters", "pages", "cli", "cluster_incidents")


def run(name: str) -> report.Printed:
    """One bench, its output shown as it comes and kept for the page."""
    print(f"== bench.{name}", flush=True)
    kept = []
    with subprocess.Popen([sys.executable, "-m", f"bench.{name}"], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            kept.append(line)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return report.parse(name, "".join(kept))


def main(names: tuple[str, ...]) -> None:
    """Every bench writes the page; some (`python -m bench.run_all collect lag`) only print it,
    so the page never shows part of a run."""
    results = [run(name) for name in names or BENCHES]
    if names:
        print(report.render(results), flush=True)
    else:
        print(f"wrote {report.write(results)}", flush=True)


if __name__ == "__main__":
    main(tuple(sys.argv[1:]))
