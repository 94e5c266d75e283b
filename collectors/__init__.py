"""Collectors: read consumer state and advisories from NATS, write them to the store."""
