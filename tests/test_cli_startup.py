"""The command starts at once: parsing flags and printing help load none of the heavy parts
(DuckDB, pandas, Arrow, numpy, numba, the NATS client, Spark), and each command loads its own
part only when it runs."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from jetwatch import cli
from tests.helpers import clean_env

HEAVY = ("duckdb", "pandas", "pyarrow", "numpy", "numba", "nats", "pyspark", "streamlit", "plotly")


def _subcommands() -> list[str]:
    parser = cli._parser()
    found = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(found.choices)


def test_every_command_has_a_handler_that_resolves_and_none_is_left_over():
    assert sorted(cli._HANDLERS) == _subcommands()
    for command, where in cli._HANDLERS.items():
        module, name = where.split(":")
        assert callable(getattr(importlib.import_module(module), name)), command


@pytest.mark.parametrize("argv", [["--help"], *([c, "--help"] for c in ("collect", "status", "check", "unpin", "up"))],
                         ids=lambda a: " ".join(a))
def test_help_loads_no_heavy_module(argv):
    probe = ("import json, sys\nfrom jetwatch import cli\n"
             f"try:\n    cli.main({argv!r})\nexcept SystemExit:\n    pass\n"
             f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=clean_env())
    assert "usage: jetwatch" in done.stdout, done.stdout + done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [], done.stderr


def test_a_command_loads_what_it_needs_when_it_runs(tmp_path):
    """`check`, run every minute by schedulers, reads a store with DuckDB alone: no pandas, numpy
    or numba, on a store that is there as on one that is not; `status` (tables and JSON) loads
    pandas when it runs, not before: the laziness is in the handler map."""
    from jetwatch.store.database import Store

    there = str(tmp_path / "there.duckdb")
    Store(there).migrate()

    def loaded(*argv: str) -> list[str]:
        probe = ("import json, sys\nfrom jetwatch import cli\n"
                 f"code = cli.main({list(argv)!r})\n"
                 "print(json.dumps([code, [m for m in ('pandas', 'numpy', 'numba') if m in sys.modules]]))")
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                              env=clean_env())
        return json.loads(done.stdout.splitlines()[-1])

    assert loaded("check", "--db", str(tmp_path / "none.duckdb")) == [3, []]
    assert loaded("check", "--db", there) == [3, []]  # no verdicts yet: UNKNOWN, read without pandas
    assert loaded("status", "--db", there)[1][0] == "pandas"
