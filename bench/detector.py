"""The verdicts judged as a detector: for each incident of the library, how long from its start
until it is named and what it is named; for each healthy look-alike, the false alarms over a
30-minute run. Over tests/consumer_model.py at the collector's default interval, judged as the
collector judges (tests/test_health.py's timeline); the real-server library is
tests/test_incidents.py.

    python -m bench.detector [--minutes 30]
"""

from __future__ import annotations

import argparse
import time

from bench.machine import print_header
from tests.consumer_model import STEP, run
from tests.test_health import INCIDENTS, LOOK_ALIKES, QUIET, START, limits, timeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of each look-alike's healthy run")
    args = parser.parse_args()
    print_header()
    began = time.perf_counter()
    print("\n| incident | expected | named | after | deadline |\n|---|---|---|---|---|")
    for name, behaviour, steps, lim, ack_wait, verdict, deadline, _ in INCIDENTS:
        got = timeline(run(behaviour, steps + 12, ack_wait=ack_wait),
                       limits(**{**lim, "ack_wait_ns": int(ack_wait * 1e9)}))[START:]
        named = next((k for k, r in enumerate(got) if r["verdict"] not in QUIET), None)
        said = "nothing" if named is None else got[named]["verdict"]
        after = "-" if named is None else f"{(named + 1) * STEP:.0f} s"
        print(f"| {name} | {verdict} | {said} | {after} | {deadline:.0f} s |")
    steps = int(args.minutes * 60 / STEP)
    print(f"\n| look-alike ({args.minutes:.0f} minutes) | cycles judged | false alarms | verdicts raised |\n|---|---|---|---|")
    for name, behaviour, lim, ack_wait in LOOK_ALIKES:
        got = timeline(run(behaviour, steps, ack_wait=ack_wait), limits(**{**lim, "ack_wait_ns": int(ack_wait * 1e9)}))
        alarms = [r["verdict"] for r in got if r["verdict"] not in QUIET]
        print(f"| {name} | {len(got)} | {len(alarms)} | {', '.join(sorted(set(alarms))) or '-'} |")
    print(f"\n({time.perf_counter() - began:.1f} s)")


if __name__ == "__main__":
    main()
