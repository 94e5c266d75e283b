-- Every pin event and every consumer deletion: pin sessions are recomputed over all of them.
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source
FROM pin_events
UNION ALL
SELECT ts, account, stream, consumer, NULL AS group_name, 'deleted' AS event, NULL AS pinned_id,
       NULL AS reason, 'advisory' AS source
FROM advisories
WHERE kind = 'consumer_action' AND json_extract_string(raw, '$.action') = 'delete';
