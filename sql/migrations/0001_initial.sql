-- Migration 1: the tables of jetwatch's first release. Applied once, in one transaction with
-- the steps after it, by Store._migrate; never edited after a release (add a new step instead).
-- Times are UTC (TIMESTAMPTZ). Names are stored exactly as the server gives them.

CREATE TABLE IF NOT EXISTS schema_version (
    version     INTEGER NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL
);

-- Facts about this store file; `store_id` names the collector's durable consumer, so that
-- collectors writing to different stores never split one stream of advisories between them.
CREATE TABLE IF NOT EXISTS store_meta (
    key    VARCHAR PRIMARY KEY,
    value  VARCHAR NOT NULL
);
INSERT OR IGNORE INTO store_meta VALUES ('store_id', replace(uuid()::VARCHAR, '-', ''));

-- One row per consumer per sampling cycle. Limits live in consumer_configs.
CREATE TABLE IF NOT EXISTS samples (
    ts                        TIMESTAMPTZ NOT NULL,
    server                    VARCHAR,
    cluster                   VARCHAR,
    domain                    VARCHAR,
    account                   VARCHAR NOT NULL,
    stream                    VARCHAR NOT NULL,
    consumer                  VARCHAR NOT NULL,
    created                   TIMESTAMPTZ,
    num_pending               BIGINT,
    num_ack_pending           BIGINT,
    num_waiting               BIGINT,
    num_redelivered           BIGINT,
    delivered_consumer_seq    BIGINT,
    delivered_stream_seq      BIGINT,
    delivered_last_active     TIMESTAMPTZ,
    ack_floor_consumer_seq    BIGINT,
    ack_floor_stream_seq      BIGINT,
    ack_floor_last_active     TIMESTAMPTZ,
    paused                    BOOLEAN NOT NULL DEFAULT false,
    pause_until               TIMESTAMPTZ,
    pin_group                 VARCHAR,
    pinned_id                 VARCHAR,
    pinned_ts                 TIMESTAMPTZ,
    leader                    VARCHAR
);

-- The newest sample of every consumer seen in the latest cycle: cheap "now" for the live views.
CREATE TABLE IF NOT EXISTS consumer_current AS SELECT * FROM samples WHERE false;

-- Limits and policy, one row per change.
CREATE TABLE IF NOT EXISTS consumer_configs (
    ts                   TIMESTAMPTZ NOT NULL,
    account              VARCHAR NOT NULL,
    stream               VARCHAR NOT NULL,
    consumer             VARCHAR NOT NULL,
    created              TIMESTAMPTZ,
    config_hash          VARCHAR NOT NULL,
    is_pull              BOOLEAN NOT NULL,
    filtered             BOOLEAN NOT NULL,
    ack_policy           VARCHAR,
    max_waiting          BIGINT,
    max_ack_pending      BIGINT,
    ack_wait_ns          BIGINT,
    max_deliver          BIGINT,
    priority_policy      VARCHAR,
    priority_groups      VARCHAR[],
    priority_timeout_ns  BIGINT,
    config_json          JSON
);

-- Every consumer advisory captured, one row per advisory id.
CREATE TABLE IF NOT EXISTS advisories (
    id           VARCHAR PRIMARY KEY,
    ts           TIMESTAMPTZ NOT NULL,
    received_at  TIMESTAMPTZ NOT NULL,
    kind         VARCHAR NOT NULL,
    subject      VARCHAR NOT NULL,
    account      VARCHAR,
    stream       VARCHAR,
    consumer     VARCHAR,
    group_name   VARCHAR,
    pinned_id    VARCHAR,
    reason       VARCHAR,
    raw          JSON NOT NULL
);

-- Pin changes the advisories did not report, derived from sampled state (store/writes.py, reconcile_pins).
CREATE TABLE IF NOT EXISTS inferred_pin_events (
    id           VARCHAR PRIMARY KEY,
    ts           TIMESTAMPTZ NOT NULL,
    recorded_at  TIMESTAMPTZ NOT NULL,
    account      VARCHAR NOT NULL,
    stream       VARCHAR NOT NULL,
    consumer     VARCHAR NOT NULL,
    group_name   VARCHAR,
    event        VARCHAR NOT NULL,
    pinned_id    VARCHAR,
    closes_id    VARCHAR,
    why          VARCHAR NOT NULL
);

-- Input jetwatch could not use, kept as received.
CREATE TABLE IF NOT EXISTS rejects (
    ts       TIMESTAMPTZ NOT NULL,
    origin   VARCHAR NOT NULL,
    subject  VARCHAR,
    error    VARCHAR NOT NULL,
    raw      VARCHAR
);

-- The collector's own health, one row per collector instance.
CREATE TABLE IF NOT EXISTS collector_status (
    collector          VARCHAR PRIMARY KEY,
    started_at         TIMESTAMPTZ NOT NULL,
    last_cycle_at      TIMESTAMPTZ,
    cycle_seconds      DOUBLE,
    streams            INTEGER,
    consumers          INTEGER,
    sample_mode        VARCHAR,
    capture_mode       VARCHAR,
    capture_pending    BIGINT,
    capture_caught_up  BOOLEAN,
    last_event_at      TIMESTAMPTZ,
    last_error         VARCHAR,
    last_error_at      TIMESTAMPTZ,
    server_url         VARCHAR
);

-- Operator actions, kept longest.
CREATE TABLE IF NOT EXISTS audit (
    ts          TIMESTAMPTZ NOT NULL,
    actor       VARCHAR NOT NULL,
    origin      VARCHAR NOT NULL,
    action      VARCHAR NOT NULL,
    account     VARCHAR,
    stream      VARCHAR NOT NULL,
    consumer    VARCHAR NOT NULL,
    group_name  VARCHAR,
    parameters  JSON,
    outcome     VARCHAR NOT NULL,
    reply       VARCHAR
);

-- Detached drains: state and progress, written by the drain process.
CREATE TABLE IF NOT EXISTS drains (
    drain_id           VARCHAR PRIMARY KEY,
    started_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL,
    actor              VARCHAR NOT NULL,
    account            VARCHAR,
    stream             VARCHAR NOT NULL,
    consumer           VARCHAR NOT NULL,
    then_action        VARCHAR NOT NULL,
    state              VARCHAR NOT NULL,
    ack_pending_start  BIGINT,
    ack_pending_now    BIGINT,
    message            VARCHAR
);

-- Pipeline output, replaced per run by pipeline/load.py.
CREATE TABLE IF NOT EXISTS pin_sessions (
    account           VARCHAR,
    stream            VARCHAR,
    consumer          VARCHAR,
    group_name        VARCHAR,
    pinned_id         VARCHAR,
    start_ts          TIMESTAMPTZ,
    end_ts            TIMESTAMPTZ,
    duration_seconds  DOUBLE,
    end_reason        VARCHAR,
    gap_seconds       DOUBLE
);

CREATE TABLE IF NOT EXISTS rollups (
    granularity          VARCHAR,
    bucket               TIMESTAMPTZ,
    account              VARCHAR,
    stream               VARCHAR,
    consumer             VARCHAR,
    samples              BIGINT,
    pending_min          BIGINT,
    pending_mean         DOUBLE,
    pending_max          BIGINT,
    pending_p95          DOUBLE,
    ack_pending_min      BIGINT,
    ack_pending_mean     DOUBLE,
    ack_pending_max      BIGINT,
    ack_pending_p95      DOUBLE,
    waiting_min          BIGINT,
    waiting_mean         DOUBLE,
    waiting_max          BIGINT,
    waiting_p95          DOUBLE,
    delivered_per_second    DOUBLE,
    acked_per_second        DOUBLE,
    redelivered_per_second  DOUBLE,
    saturated_fraction      DOUBLE
);

CREATE TABLE IF NOT EXISTS verdict_history (
    ts        TIMESTAMPTZ,
    account   VARCHAR,
    stream    VARCHAR,
    consumer  VARCHAR,
    verdict   VARCHAR,
    reasons   VARCHAR
);

CREATE TABLE IF NOT EXISTS pipeline_runs (
    run_id       VARCHAR PRIMARY KEY,
    started_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ,
    since_ts     TIMESTAMPTZ,
    until_ts     TIMESTAMPTZ,
    outcome      VARCHAR,
    rows_in      BIGINT,
    message      VARCHAR
);
