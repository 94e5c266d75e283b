-- Migration 2: verdicts judged by the collector after every cycle.

-- One row per consumer in the live state: its verdict, every finding with its numbers, and since
-- when the verdict has held. Kept when the collector stops (last known, never dropped for lack of
-- data); a consumer that disappears from the live state loses its row.
CREATE TABLE IF NOT EXISTS verdicts_current (
    account                 VARCHAR NOT NULL,
    stream                  VARCHAR NOT NULL,
    consumer                VARCHAR NOT NULL,
    verdict                 VARCHAR NOT NULL,
    level                   VARCHAR NOT NULL,
    reason                  VARCHAR NOT NULL,
    findings                JSON NOT NULL,
    since                   TIMESTAMPTZ NOT NULL,
    judged_at               TIMESTAMPTZ NOT NULL,
    samples                 INTEGER,
    delivered_per_second    DOUBLE,
    acked_per_second        DOUBLE,
    redelivered_per_second  DOUBLE
    -- One row per consumer by construction (replaced whole each cycle); no index to maintain.
);

-- Every verdict transition, as the collector saw it (from_verdict NULL: first judged).
CREATE TABLE IF NOT EXISTS verdict_changes (
    ts            TIMESTAMPTZ NOT NULL,
    account       VARCHAR NOT NULL,
    stream        VARCHAR NOT NULL,
    consumer      VARCHAR NOT NULL,
    from_verdict  VARCHAR,
    to_verdict    VARCHAR NOT NULL,
    reason        VARCHAR NOT NULL
);
