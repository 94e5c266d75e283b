-- Migration 7: raw samples in two tables, so that one consumer's history is stored together.
-- The collector appends each cycle to `samples_recent` (by time: every consumer in each row group).
-- Every --seal-every it moves the oldest span of it to `samples_sealed`, sorted by consumer and time,
-- where each consumer's rows are a few row groups whose zone maps (on `cid`, a number: string
-- statistics keep only 8 bytes, and names often share longer prefixes) let a read of one consumer
-- skip every other consumer's. `samples` is a view over both (sql/views.sql): every reader, and
-- anyone's SQL, reads it as one table. A step that adds a column to samples adds it to both tables.
-- The rows written before this step stay in `samples_recent` and are sealed a span at a time.
ALTER TABLE samples RENAME TO samples_recent;

-- A consumer's number in `samples_sealed`, given the first time its rows are sealed; never reused.
CREATE TABLE IF NOT EXISTS consumer_ids (
    account   VARCHAR NOT NULL,
    stream    VARCHAR NOT NULL,
    consumer  VARCHAR NOT NULL,
    cid       UINTEGER NOT NULL,
    PRIMARY KEY (account, stream, consumer)
);

CREATE TABLE IF NOT EXISTS samples_sealed AS SELECT 0::UINTEGER AS cid, * FROM samples_recent WHERE false;
