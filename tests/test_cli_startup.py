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
    """`check` on a store that is not there reads nothing, yet its handler (status) was loaded:
    the laziness is in the handler map, not in what a command may use."""
    probe = ("import sys\nfrom jetwatch import cli\n"
             f"code = cli.main(['check', '--db', {str(tmp_path / 'none.duckdb')!r}])\n"
             "print('pandas' in sys.modules, code)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=clean_env())
    assert done.stdout.splitlines()[-1].split() == ["True", "3"], done.stdout + done.stderr
