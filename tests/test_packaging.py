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


def _stages(text: str) -> dict[str, str]:
    """Each build stage's instructions, by its name."""
    parts = re.split(r"^FROM \S+ AS (\w+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_dockerfile_builds_an_image_per_role_each_non_root_with_its_command():
    text = (ROOT / "Dockerfile").read_text()
    assert text.startswith("#") and re.search(r"^ARG BASE=python:3.11-slim-bookworm$", text, re.M)
    stages = _stages(text)
    assert list(stages) == ["base", "collector", "pipeline", "full"]
    collector, pipeline, full = stages["collector"], stages["pipeline"], stages["full"]
    # The collector's image: no Java, no Spark; the dashboard beside it.
    assert "openjdk" not in collector and 'pip install --no-cache-dir "/app[collector,dashboard]"' in collector
    assert "openjdk-17-jre-headless" in pipeline and '"/app[pipeline]"' in pipeline
    assert 'pip install --no-cache-dir "/app[all]"' in full  # `up` runs every role: every extra
    for name, stage in (("collector", collector), ("pipeline", pipeline), ("full", full)):
        assert re.findall(r"^USER (\S+)$", stage, re.M)[-1] == "10001", name
    assert 'CMD ["jetwatch", "collect"]' in collector and 'CMD ["jetwatch", "pipeline", "run"]' in pipeline
    assert 'VOLUME ["/data"]' in collector and "HEALTHCHECK" in full
    # The server URL (maybe with credentials) reaches `up` through the environment, never argv.
    assert 'export JETWATCH_SERVER=\\"${JETWATCH_SERVER:-$NATS_URL}\\"; exec jetwatch up"]' in full


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text().splitlines()
    commands = [line for line in readme[:20] if line.startswith("make ")]
    assert commands == ["make up", "make test"]
    ci = [line for line in (ROOT / ".ci/run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    assert ci == ["make test"]


