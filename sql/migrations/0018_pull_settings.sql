-- Migration 18: the settings each pull worker announced it pulls with (core/pull_announce.py): pull
-- expiry, batch, priority group, `min_pending`, `min_ack_pending`, `priority` and the policy it pulls
-- under, which live in pull requests only and never in consumer info. One row per announcing
-- connection (`worker_key`: account, stream, consumer, server id, client id and name), the latest
-- announcement with when it was first and last seen. `verification` as pin_holders': `verified`
-- (CONNZ shows the announcing connection under the claimed name and account), `unverified`, or
-- `no_connz`. Config findings read the recent ones (health/config_findings.py, pull_findings).
CREATE TABLE IF NOT EXISTS pull_settings (
    worker_key VARCHAR PRIMARY KEY,
    account VARCHAR,
    stream VARCHAR NOT NULL,
    consumer VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    host VARCHAR,
    pid BIGINT,
    version VARCHAR,
    client_id BIGINT,
    server_id VARCHAR,
    group_name VARCHAR,
    policy VARCHAR,
    expires_ns BIGINT,
    batch BIGINT,
    min_pending BIGINT,
    min_ack_pending BIGINT,
    priority INTEGER,
    no_wait BOOLEAN NOT NULL,
    verification VARCHAR NOT NULL,
    verification_note VARCHAR,
    first_seen_at TIMESTAMPTZ NOT NULL,
    received_at TIMESTAMPTZ NOT NULL
);
