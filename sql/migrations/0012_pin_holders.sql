-- Migration 12: who holds each pin, as its worker announced it (core/pin_announce.py). One row per pin id:
-- the latest announcement, except that an unverified one never replaces a verified one (pin ids are
-- broadcast in advisories, so anyone could announce one). `verification` is `verified` (CONNZ shows the
-- announcing connection under the claimed name and account), `unverified`, or `no_connz` (the collector
-- has no CONNZ access to check).
CREATE TABLE IF NOT EXISTS pin_holders (
    pin_id VARCHAR PRIMARY KEY,
    account VARCHAR,
    stream VARCHAR NOT NULL,
    consumer VARCHAR NOT NULL,
    group_name VARCHAR,
    name VARCHAR NOT NULL,
    host VARCHAR,
    pid BIGINT,
    version VARCHAR,
    client_id BIGINT,
    server_id VARCHAR,
    verification VARCHAR NOT NULL,
    verification_note VARCHAR,
    received_at TIMESTAMPTZ NOT NULL
);
