"""The container recipe, the CI script and the documented settings stay true."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_dockerfile_passes_hadolint():
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run([str(hadolint), "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_runs_up_as_non_root_with_a_volume_and_healthcheck():
    text = (ROOT / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM python:3.11-slim-bookworm" in text
    assert "openjdk-17-jre-headless" in text
    assert re.search(r"^USER 10001$", text, re.M)
    assert 'VOLUME ["/data"]' in text and "HEALTHCHECK" in text
    # The server URL (maybe with credentials) reaches `up` through the environment, never argv.
    assert 'export JETWATCH_SERVER=\\"${JETWATCH_SERVER:-$NATS_URL}\\"; exec jetwatch up"]' in text
    assert 'pip install --no-cache-dir "/app[all]"' in text  # `up` runs every role: every extra


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text().splitlines()
    commands = [line for line in readme[:20] if line.startswith("make ")]
    assert commands == ["make up", "make test"]
    ci = [line for line in (ROOT / ".ci/run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    assert ci == ["make test"]


