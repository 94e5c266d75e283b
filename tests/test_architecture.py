"""The package as installed: one top-level import package, layers that run one way, no warnings.

Checked on the wheel a user would install, unpacked, not on the source tree: import-linter only
sees the mapped folders (collectors/ as jetwatch.collectors, ...) in a real install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
# One worker runs this module, so the wheel (`wheel`, module-scoped) is built once.
pytestmark = pytest.mark.xdist_group("wheel")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source")  # a clean copy: no build/ left over from earlier builds
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    for name in listed:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(source)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return next(out.glob("jetwatch-*.whl")), done.stdout + done.stderr


@pytest.fixture
def installed(wheel: tuple[Path, str], tmp_path: Path) -> Path:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel[0]) as z:
        z.extractall(site)
    return site


def lint_imports(site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_the_wheel_holds_one_top_level_package(wheel):
    names = {n.split("/")[0] for n in zipfile.ZipFile(wheel[0]).namelist()}
    assert {n for n in names if not n.endswith(".dist-info")} == {"jetwatch"}
    files = set(zipfile.ZipFile(wheel[0]).namelist())
    for expected in ("jetwatch/cli.py", "jetwatch/collectors/runner.py", "jetwatch/sql/migrations/0001_initial.sql", "jetwatch/sql/views.sql",
                     "jetwatch/sql/queries/fleet_latest.sql", "jetwatch/dashboard/app.py",
                     "jetwatch/dashboard/views/fleet.py", "jetwatch/pipeline/job.py", "jetwatch/core/settings.py"):
        assert expected in files


def test_building_the_wheel_prints_no_packaging_warnings(wheel):
    warnings = [line for line in wheel[1].splitlines() if "warning" in line.lower()]
    assert warnings == []


def test_the_console_script_points_at_the_cli(wheel):
    entry = zipfile.ZipFile(wheel[0]).read("jetwatch-0.1.0.dist-info/entry_points.txt").decode()
    assert "jetwatch = jetwatch.cli:main" in entry


def test_the_layers_contract_holds_on_the_installed_package(installed, tmp_path):
    done = lint_imports(installed, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 4 kept, 0 broken." in done.stdout


@pytest.mark.parametrize("module, backward", [
    ("core/clock.py", "from jetwatch.store import database"),  # the bottom reaching up
    ("store/database.py", "from jetwatch.health import rules"),  # the store reaching into health
    ("collectors/filters.py", "from jetwatch.dashboard import data"),  # the collector reaching the pages
    ("health/rules.py", "import streamlit"),  # a data module importing Streamlit
    ("exporters/metrics.py", "from jetwatch.collectors import runner"),  # an exporter reaching back into the collector
    ("exporters/alertmanager.py", "from jetwatch.store import database"),  # an exporter reading the store
    ("exporters/metrics_server.py", "import nats"),  # an exporter on a NATS connection of its own
    ("dashboard/data.py", "from jetwatch.exporters import metrics"),  # the pages reaching the exporters
    ("collectors/judging.py", "from jetwatch.exporters import alertmanager"),  # a collector other than the runner
])
def test_a_backward_import_breaks_the_contract(installed, tmp_path, module, backward):
    path = installed / "jetwatch" / module
    path.write_text(path.read_text() + f"\n{backward}  # deliberately backward\n")
    done = lint_imports(installed, tmp_path)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout and module.replace("/", ".").removesuffix(".py") in done.stdout


def test_a_new_top_level_part_must_be_placed_in_a_layer(installed, tmp_path):
    shutil.copytree(installed / "jetwatch" / "demo", installed / "jetwatch" / "newpart")
    done = lint_imports(installed, tmp_path)
    assert done.returncode != 0 and "newpart" in done.stdout
