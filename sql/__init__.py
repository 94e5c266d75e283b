"""Schema migrations, views and named queries, kept as .sql files and loaded by name."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class UnknownQuery(KeyError):
    """No file sql/queries/<name>.sql exists."""


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    text: str


@cache
def migrations() -> tuple[Migration, ...]:
    """Every step in sql/migrations/NNNN_name.sql, in order; numbers run 1, 2, 3 ... without gaps."""
    found = []
    for entry in resources.files(__name__).joinpath("migrations").iterdir():
        m = _MIGRATION_NAME.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda step: step.number)
    numbers = [step.number for step in found]
    if numbers != list(range(1, len(found) + 1)):
        raise RuntimeError(f"sql/migrations must be numbered 1..n without gaps or repeats, found {numbers}")
    return tuple(found)


def schema_version() -> int:
    """The schema version this code writes: the number of its last migration."""
    return migrations()[-1].number


@cache
def views() -> str:
    return resources.files(__name__).joinpath("views.sql").read_text(encoding="utf-8")


@cache
def query(name: str) -> str:
    """The text of sql/queries/<name>.sql; names are code constants, never user input."""
    path = resources.files(__name__).joinpath("queries", f"{name}.sql")
    if not path.is_file():
        raise UnknownQuery(name)
    return path.read_text(encoding="utf-8")
