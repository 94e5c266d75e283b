"""The DuckDB store: one file, one operation at a time."""
