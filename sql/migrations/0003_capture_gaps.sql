-- Migration 3: gaps in the advisory record, where the collector reads
-- the capture stream from, and the collector's clock offset and capture warning.

-- A range of capture-stream messages the store never got: the stream's size or age limit dropped
-- them before the collector read them, or the stream was deleted (to_seq and missed unknown then).
-- from_ts/to_ts: the stored times of the messages on either side (pin history is incomplete between).
CREATE TABLE IF NOT EXISTS capture_gaps (
    detected_at  TIMESTAMPTZ NOT NULL,
    stream       VARCHAR NOT NULL,
    from_seq     BIGINT NOT NULL,
    to_seq       BIGINT,
    missed       BIGINT,
    from_ts      TIMESTAMPTZ,
    to_ts        TIMESTAMPTZ,
    reason       VARCHAR NOT NULL
);

-- The last capture-stream message the store holds, per capture stream and incarnation of it
-- (`stream_created`, as the server reports it): the next one read should follow it.
CREATE TABLE IF NOT EXISTS capture_cursor (
    stream          VARCHAR PRIMARY KEY,
    stream_created  VARCHAR,
    last_seq        BIGINT,
    last_ts         TIMESTAMPTZ,
    updated_at      TIMESTAMPTZ NOT NULL
);

-- Server clock minus the collector's clock, measured each cycle; and what is wrong with the
-- capture stream, when something is (limits that differ and could not be corrected).
ALTER TABLE collector_status ADD COLUMN IF NOT EXISTS clock_offset_seconds DOUBLE;
ALTER TABLE collector_status ADD COLUMN IF NOT EXISTS capture_warning VARCHAR;

-- The pipeline marks each pin session that overlaps a capture gap (its end may be missing).
ALTER TABLE pin_sessions ADD COLUMN IF NOT EXISTS spans_gap BOOLEAN;
