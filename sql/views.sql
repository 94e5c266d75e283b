-- Views are derived, not data: recreated on every upgrade, after the migrations, so they always
-- match the newest tables.

-- Documented views (README, "Querying the store").

-- One row per pin or unpin; the server keeps one pin per consumer.
CREATE OR REPLACE VIEW pin_events AS
SELECT ts, account, stream, consumer, group_name,
       CASE kind WHEN 'consumer_group_pinned' THEN 'pinned' ELSE 'unpinned' END AS event,
       CASE kind WHEN 'consumer_group_pinned' THEN pinned_id END AS pinned_id,
       reason, 'advisory' AS source
FROM advisories
WHERE kind IN ('consumer_group_pinned', 'consumer_group_unpinned')
UNION ALL
SELECT ts, account, stream, consumer, group_name, event,
       CASE event WHEN 'pinned' THEN pinned_id END AS pinned_id,
       NULL AS reason, 'inferred' AS source
FROM inferred_pin_events;

-- Everything that starts or ends a pin session: the pin events and each consumer's deletion.
CREATE OR REPLACE VIEW pin_session_events AS
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source
FROM pin_events
UNION ALL
SELECT ts, account, stream, consumer, NULL AS group_name, 'deleted' AS event, NULL AS pinned_id,
       NULL AS reason, 'advisory' AS source
FROM advisories
WHERE kind = 'consumer_action' AND json_extract_string(raw, '$.action') = 'delete';

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
