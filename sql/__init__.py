"""Schema and named queries, kept as .sql files and loaded by name."""

from __future__ import annotations

from functools import cache
from importlib import resources

SCHEMA_VERSION = 1


class UnknownQuery(KeyError):
    """No file sql/queries/<name>.sql exists."""


@cache
def schema() -> str:
    return resources.files(__name__).joinpath("schema.sql").read_text(encoding="utf-8")


@cache
def query(name: str) -> str:
    """The text of sql/queries/<name>.sql; names are code constants, never user input."""
    path = resources.files(__name__).joinpath("queries", f"{name}.sql")
    if not path.is_file():
        raise UnknownQuery(name)
    return path.read_text(encoding="utf-8")
