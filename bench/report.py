"""docs/benchmarks.md from one `make bench` run: the machine and versions the benches printed
first, then one table of what each bench printed, line by line. Each run replaces the file
whole; earlier figures belong in CHANGELOG.md, not here.

Pure functions over the benches' printed text (`bench.run_all` captures it), so the table is
tested without running a bench."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
_RUN = re.compile(r";? ?run (\d{4}-\d\d-\d\d \d\d:\d\d) UTC$")


@dataclass(frozen=True)
class Printed:
    """What one bench printed: its machine header (empty when it printed none) and the rest."""

    name: str
    machine: str
    lines: tuple[str, ...]
    run_at: str = ""


def parse(name: str, stdout: str) -> Printed:
    """Split a bench's output into its machine header (the line bench.machine prints first) and
    its figures; blank lines are dropped."""
    machine, run_at, lines = "", "", []
    for line in stdout.splitlines():
        line = line.rstrip()
        if not line.strip():
            continue
        if line.startswith("machine: ") and not machine:
            found = _RUN.search(line)
            run_at = found.group(1) if found else ""
            machine = _RUN.sub("", line).removeprefix("machine: ")
            continue
        lines.append(line)
    return Printed(name, machine, tuple(lines), run_at)


def _cell(line: str) -> str:
    """A printed line as one table cell: a Markdown table row the bench printed (bench.detector's)
    becomes its cells joined by ' · ', its separator row nothing; pipes are escaped."""
    text = line.strip()
    if text.startswith("|") and text.endswith("|"):
        cells = [c.strip() for c in text.strip("|").split("|")]
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            return ""
        text = " · ".join(cells)
    return text.replace("|", "\\|")


def render(results: list[Printed]) -> str:
    """The whole page: where the figures come from, the machine, one table."""
    machines = list(dict.fromkeys(r.machine for r in results if r.machine))
    times = sorted(r.run_at for r in results if r.run_at)
    out = ["# Benchmarks", "",
           "Written by `make bench` (`bench/run_all.py`), which runs every bench one after another and",
           "replaces this page with what they printed; do not edit it by hand. Each bench compares its own",
           "path with a baseline doing the same work in the same run, so compare ratios within a run; the",
           "hosts vary from day to day. Earlier runs' figures are in [CHANGELOG.md](../CHANGELOG.md).", ""]
    if times:
        out += [f"Run {times[0]} to {times[-1]} UTC." if times[0] != times[-1] else f"Run {times[0]} UTC.", ""]
    for m in machines:
        out += [f"Machine: {m}", ""]
    out += ["| bench | what it printed |", "|---|---|"]
    for r in results:
        first = True
        for line in r.lines:
            cell = _cell(line)
            if not cell:
                continue
            out.append(f"| {f'`bench.{r.name}`' if first else ''} | {cell} |")
            first = False
        if first:
            out.append(f"| `bench.{r.name}` | (printed nothing) |")
    return "\n".join(out) + "\n"


def write(results: list[Printed], page: Path | None = None) -> Path:
    """Replace the page (docs/benchmarks.md unless told) with this run's."""
    page = page or PAGE
    page.write_text(render(results), encoding="utf-8")
    return page
