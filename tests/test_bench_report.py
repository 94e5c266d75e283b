"""docs/benchmarks.md as `make bench` writes it (bench/report.py, bench/run_all.py), over output
the benches printed (bench.collect's and bench.detector's, taken from real runs): one table of the
latest run, the machine and versions above it, the page replaced whole by every run."""

from __future__ import annotations

from bench import report, run_all

COLLECT = 'machine: Linux-6.18.44-fc-v657-x86_64-with-glibc2.36, 2 CPUs (Intel(R) Xeon(R) Processor), 24 GiB; Python 3.11.7; nats-server: v2.15.1; nats-py 2.16.0, duckdb 2.0.1, pandas 2.3.3, pyarrow 26.0.1, msgspec 0.22.0, pyspark 4.3.0, streamlit 1.67.0, prometheus-client 0.26.0; java yes; run 2026-11-27 16:08 UTC\nsetup: 200 consumers in 4 streams in 0.0s\nfull sample (CONSUMER.LIST + parse + store), median of 2: 0.036s (5,607 consumers/s)\nbaseline, the same sample with CONSUMER.NAMES + one INFO per consumer (same cap of 8 in flight, same parse and store), median of 2: 0.083s\nratio: the full sample is 2.3x cheaper than INFO per consumer\n'

DETECTOR = 'machine: Linux-6.18.44-fc-v657-x86_64-with-glibc2.36, 2 CPUs (Intel(R) Xeon(R) Processor), 24 GiB; Python 3.11.7; nats-server: v2.15.1; nats-py 2.16.0, duckdb 2.0.1, pandas 2.3.3, pyarrow 26.0.1, msgspec 0.22.0, pyspark 4.3.0, streamlit 1.67.0, prometheus-client 0.26.0; java yes; run 2026-11-27 16:09 UTC\n\n| incident | expected | named | after | deadline |\n|---|---|---|---|---|\n| stuck pinned client: keeps pulling, stops acknowledging, a standby waits | STALLED | STALLED | 20 s | 30 s |\n| stopped pin holder: pulls nothing, keeps its pin, a standby waits, work arrives | PIN_IDLE | PIN_IDLE | 20 s | 30 s |\n\n| look-alike (1 minutes) | cycles judged | false alarms | verdicts raised |\n|---|---|---|---|\n| bursty arrivals drained in a sawtooth | 12 | 0 | - |\n| a slow worker that keeps up: 8 s a message, one every 10 s | 12 | 0 | - |\n\n(3.0 s)\n'


def test_a_bench_output_splits_into_its_machine_and_its_figures():
    printed = report.parse("collect", COLLECT)
    assert printed.machine.startswith("Linux-") and "nats-server: v2.15.1" in printed.machine
    assert "run 20" not in printed.machine and printed.run_at == "2026-11-27 16:08"
    assert printed.lines[-1] == "ratio: the full sample is 2.3x cheaper than INFO per consumer"
    assert not any(line.startswith("machine:") or not line.strip() for line in printed.lines)


def test_the_page_is_one_table_with_the_machine_above_it():
    page = report.render([report.parse("collect", COLLECT), report.parse("detector", DETECTOR)])
    lines = page.splitlines()
    assert lines[0] == "# Benchmarks"
    assert sum(line.startswith("Machine: ") for line in lines) == 1  # the same machine, said once
    assert "Run 2026-11-27 16:08 to 2026-11-27 16:09 UTC." in lines
    table = [line for line in lines if line.startswith("|")]
    assert table[:2] == ["| bench | what it printed |", "|---|---|"]
    assert lines[lines.index(table[0]):lines.index(table[-1]) + 1] == table  # one table, no gaps
    assert "| `bench.collect` | setup: 200 consumers in 4 streams in 0.0s |" in table
    assert "|  | ratio: the full sample is 2.3x cheaper than INFO per consumer |" in table
    # The detector's own Markdown tables become rows of this one: cells joined, separators gone.
    assert "| `bench.detector` | incident · expected · named · after · deadline |" in table
    assert any(line.startswith("|  | stuck pinned client: keeps pulling, stops acknowledging, a standby waits · STALLED · STALLED · 20 s") for line in table)
    assert not any("---|---|---" in line for line in table[2:])
    assert all(line.count(" | ") == 1 for line in table[2:])  # every row two cells, whatever was printed


def test_make_bench_replaces_the_page_whole(tmp_path, monkeypatch):
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nan older run's figures\n")
    printed = {"collect": report.parse("collect", COLLECT), "detector": report.parse("detector", DETECTOR)}
    monkeypatch.setattr(run_all, "BENCHES", ("detector", "collect"))
    monkeypatch.setattr(run_all, "run", printed.__getitem__)
    monkeypatch.setattr(report, "PAGE", page)
    run_all.main(())
    first = page.read_text()
    assert "older run" not in first and first == report.render([printed["detector"], printed["collect"]])
    run_all.main(())
    assert page.read_text() == first  # replaced, not appended


def test_benches_named_alone_print_the_table_and_leave_the_page(tmp_path, monkeypatch, capsys):
    page = tmp_path / "benchmarks.md"
    page.write_text("a complete run\n")
    monkeypatch.setattr(run_all, "run", lambda name: report.parse(name, COLLECT))
    monkeypatch.setattr(report, "PAGE", page)
    run_all.main(("collect",))
    assert page.read_text() == "a complete run\n"
    assert "| `bench.collect` |" in capsys.readouterr().out
