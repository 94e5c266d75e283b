-- Views are derived, not data: recreated on every upgrade, after the migrations, so they always
-- match the newest tables.

-- Documented views (README, "Querying the store").

-- Every raw sample: the cycles not sealed yet and the sealed ones (migration 7). The view is what to
-- query; the two tables are how the store keeps it (`sampled_at`, the collector's cycle time, is how
-- sealing chooses what to move, and `cycle` marks the live state: neither is a sample's fact).
CREATE OR REPLACE VIEW samples AS
SELECT * EXCLUDE (sampled_at, cycle) FROM samples_recent
UNION ALL BY NAME
SELECT * EXCLUDE (cid) FROM samples_sealed;

-- One row per pin or unpin; the server keeps one pin per consumer.
-- `vouched` says what sampled state makes of a pin: 'confirmed' (a sample showed its pin id; an
-- inferred pin is sampled state), 'unconfirmed' (none did within the grace period: a pin shorter
-- than a sampling interval, or a forged advisory), 'pending' (not decided yet); NULL for unpins.
CREATE OR REPLACE VIEW pin_events AS
SELECT a.ts, a.account, a.stream, a.consumer, a.group_name,
       CASE a.kind WHEN 'consumer_group_pinned' THEN 'pinned' ELSE 'unpinned' END AS event,
       CASE a.kind WHEN 'consumer_group_pinned' THEN a.pinned_id END AS pinned_id,
       a.reason, 'advisory' AS source,
       CASE a.kind WHEN 'consumer_group_pinned' THEN coalesce(c.status, 'pending') END AS vouched
FROM advisories a LEFT JOIN pin_confirmations c ON c.advisory_id = a.id
WHERE a.kind IN ('consumer_group_pinned', 'consumer_group_unpinned')
UNION ALL
SELECT ts, account, stream, consumer, group_name, event,
       CASE event WHEN 'pinned' THEN pinned_id END AS pinned_id,
       NULL AS reason, 'inferred' AS source,
       CASE event WHEN 'pinned' THEN 'confirmed' END AS vouched
FROM inferred_pin_events;

-- Everything that starts or ends a pin session: the pin events and each consumer's deletion.
CREATE OR REPLACE VIEW pin_session_events AS
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source, vouched
FROM pin_events
UNION ALL
SELECT ts, account, stream, consumer, NULL AS group_name, 'deleted' AS event, NULL AS pinned_id,
       NULL AS reason, 'advisory' AS source, NULL AS vouched
FROM advisories
WHERE kind = 'consumer_action' AND json_extract_string(raw, '$.action') = 'delete';

-- The live state (migration 9): the current cycle's rows, and the last known rows of what it did not
-- read (a stream whose listing failed, a rejected entry, an account not sampled).
CREATE OR REPLACE VIEW consumer_current AS
SELECT * EXCLUDE (sampled_at, cycle) FROM samples_recent
WHERE cycle = (SELECT cycle FROM current_cycle)
UNION ALL BY NAME
SELECT * FROM current_held;

-- One row per consumer seen in the latest cycle: newest sample and current limits.
CREATE OR REPLACE VIEW consumer_latest AS
SELECT c.*,
       cfg.is_pull, cfg.filtered, cfg.ack_policy, cfg.max_waiting, cfg.max_ack_pending,
       cfg.ack_wait_ns, cfg.max_deliver, cfg.priority_policy, cfg.priority_groups,
       cfg.priority_timeout_ns, cfg.ts AS config_changed_at
FROM consumer_current c
LEFT JOIN (
    SELECT * FROM consumer_configs
    QUALIFY row_number() OVER (PARTITION BY account, stream, consumer ORDER BY ts DESC) = 1
) cfg USING (account, stream, consumer);

-- Every message a consumer dropped (migration 13): from MAX_DELIVERIES (`dropped_by` max_deliver) and
-- MSG_TERMINATED (`terminated`, with the client's `reason`) advisories, with what a read of the
-- message found (`read_state` NULL: not read yet).
CREATE OR REPLACE VIEW dropped_messages AS
WITH d AS (
    SELECT id, ts, account, stream, consumer,
           CASE kind WHEN 'max_deliver' THEN 'max_deliver' ELSE 'terminated' END AS dropped_by,
           TRY_CAST(json_extract_string(raw, '$.stream_seq') AS BIGINT) AS stream_seq,
           TRY_CAST(json_extract_string(raw, '$.consumer_seq') AS BIGINT) AS consumer_seq,
           TRY_CAST(json_extract_string(raw, '$.deliveries') AS BIGINT) AS deliveries,
           CASE kind WHEN 'terminated' THEN reason END AS reason
    FROM advisories
    WHERE kind IN ('max_deliver', 'terminated') AND stream IS NOT NULL AND consumer IS NOT NULL
)
SELECT d.*, r.state AS read_state, r.subject AS message_subject, r.stored_at AS message_time,
       r.note AS read_note, r.read_at
FROM d LEFT JOIN dropped_message_reads r
  ON r.account = d.account AND r.stream = d.stream AND r.stream_seq = d.stream_seq
WHERE d.stream_seq IS NOT NULL;
