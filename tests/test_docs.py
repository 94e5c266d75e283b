"""The README and docs/ stay true to the code: the generated tables are the declarations' own
output, every relative link resolves, and the README stays a page for users.

The generated tables are compared whole, row for row: a setting or metric added, removed or
reworded without regenerating its table fails here (`jetwatch settings` and `jetwatch metrics`
print them)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from jetwatch.core.settings import SETTINGS, reference_markdown
from jetwatch.exporters import metrics

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]


def table_at(text: str, header: str) -> str:
    """The Markdown table whose first line is `header`: that line and every `|` line after it."""
    lines = text.splitlines()
    assert header in lines, f"no table starting {header!r}"
    start = lines.index(header)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[start:end])


def test_the_configuration_table_is_generated_from_the_settings():
    doc = (DOCS / "configuration.md").read_text()
    expected = reference_markdown()
    assert table_at(doc, expected.splitlines()[0]) == expected, \
        "regenerate the table in docs/configuration.md with `jetwatch settings`"
    for s in SETTINGS:
        assert s.env in doc and (not s.has_flag or s.flag in doc)


def test_the_metrics_table_is_generated_from_the_declaration():
    doc = (DOCS / "metrics.md").read_text()
    expected = metrics.reference_markdown()
    assert table_at(doc, expected.splitlines()[0]) == expected, \
        "regenerate the table in docs/metrics.md with `jetwatch metrics`"


def test_a_table_out_of_step_is_caught():
    """The comparison itself: a row left behind after the generated ones is a difference."""
    expected = reference_markdown()
    stale = "intro\n\n" + expected + "\n| `--gone` | `JETWATCH_GONE` | | a setting removed from the code |\n\nafter"
    assert table_at(stale, expected.splitlines()[0]) != expected
    assert table_at("intro\n\n" + expected + "\n\nafter", expected.splitlines()[0]) == expected


def test_every_alert_of_the_rules_file_is_in_the_alerts_table():
    rules = (ROOT / "deploy/prometheus/jetwatch-rules.yml").read_text()
    alerts = set(re.findall(r"^\s*-?\s*alert:\s*(\w+)", rules, re.M))
    doc = (DOCS / "metrics.md").read_text()
    assert alerts and all(f"| `{a}` |" in doc for a in alerts), alerts


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    fence = False
    found = set()
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"^#{1,6} (.*)", line)):
            found.add(_slug(m.group(1)))
    return found


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # code blocks hold no links
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file, or heading in it, does not exist."""
    broken = []
    for target in _links(page):
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert not broken_links(page), f"{page.name}: links that lead nowhere: {broken_links(page)}"


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# A `code` title, too\n\n[a](p.md#a-code-title-too) [b](missing.md) [c](p.md#nowhere) "
                    "[d](https://x.example/y) [e](#a-code-title-too)\n\n```\n[f](nothing.md)\n```\n")
    assert broken_links(page) == ["missing.md", "p.md#nowhere"]


def test_every_screenshot_is_shown_somewhere():
    shown = "\n".join(p.read_text() for p in PAGES)
    unshown = [p.name for p in (DOCS / "screenshots").glob("*.png") if p.name not in shown]
    assert not unshown, unshown


def test_the_readme_is_a_page_for_users():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move detail into docs/"
    assert max(len(line) for line in lines) <= 400


TRACKER = re.compile(r"\bissues? #?\d+|\(finding \d+\)|\bfinding \d+\b|(?<![\w&\"'])#\d{1,4}\b(?!;)", re.I)


def test_no_tracker_numbers_in_code_or_docs():
    """The tracker is not in the repository: a reference to one of its issues leads nowhere."""
    roots = ["README.md", "CHANGELOG.md", "docs", "actions", "bench", "collectors", "commands", "core",
             "dashboard", "demo", "health", "pipeline", "sql", "store", "tests", "deploy"]
    found = []
    # The project's own files, tracked or new, never what .gitignore keeps out (installed packages).
    ours = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *roots], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.splitlines()
    for name in ours:
        f = ROOT / name
        if f.suffix in (".py", ".sql", ".md", ".yml") and f.exists():
            if f == Path(__file__):
                continue
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if TRACKER.search(line):
                    found.append(f"{name}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
