"""What a bench ran on: every bench prints this first, so each figure docs/benchmarks.md shows comes
with its machine and the versions that produced it."""

from __future__ import annotations

import datetime as dt
import importlib.metadata as md
import os
import platform
import shutil
import subprocess
from pathlib import Path

PACKAGES = ("nats-py", "duckdb", "pandas", "pyarrow", "msgspec", "pyspark", "streamlit", "prometheus-client")


def _cpu() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def _nats_server() -> str:
    from jetwatch.core.embedded_server import nats_server_binary

    try:
        binary = nats_server_binary()
        return subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as exc:  # a header line must never stop a bench
        return f"nats-server unknown ({exc})"


def header() -> str:
    versions = ", ".join(f"{p} {md.version(p)}" for p in PACKAGES if _installed(p))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"machine: {platform.platform()}, {os.cpu_count()} CPUs ({_cpu()}), {memory:.0f} GiB; "
            f"Python {platform.python_version()}; {_nats_server()}; {versions}; "
            f"java {'yes' if shutil.which('java') else 'no'}; run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")


def _installed(package: str) -> bool:
    try:
        md.version(package)
        return True
    except md.PackageNotFoundError:
        return False


def print_header() -> None:
    print(header(), flush=True)
