-- One row per advisory id: a redelivered batch inserts nothing twice.
INSERT OR IGNORE INTO advisories BY NAME
SELECT id, ts::TIMESTAMPTZ AS ts, received_at::TIMESTAMPTZ AS received_at, kind, subject, account,
       stream, consumer, group_name, pinned_id, reason, raw::JSON AS raw
FROM (SELECT * FROM advisory_batch QUALIFY row_number() OVER (PARTITION BY id ORDER BY ts) = 1);
