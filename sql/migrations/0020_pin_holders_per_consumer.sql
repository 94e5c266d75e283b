-- Migration 20: a pin's announced holder belongs to one consumer. Pin ids are broadcast in advisories,
-- so keyed by pin id alone an announcement on any consumer's subject could name itself the holder of
-- another consumer's pin. `holder_key` is the JSON array [account, stream, consumer, pin_id] (DuckDB's
-- `to_json` of the list, made by upsert_pin_holder.sql only), so the same pin id announced on two
-- consumers is two rows, and the pages join a consumer's pin to its own consumer's holder.
CREATE TABLE pin_holders_by_consumer (
    holder_key VARCHAR PRIMARY KEY,
    pin_id VARCHAR NOT NULL,
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
INSERT INTO pin_holders_by_consumer
SELECT to_json([account, stream, consumer, pin_id])::VARCHAR, pin_id, account, stream, consumer, group_name, name,
       host, pid, version, client_id, server_id, verification, verification_note, received_at
FROM pin_holders;
DROP TABLE pin_holders;
ALTER TABLE pin_holders_by_consumer RENAME TO pin_holders;
