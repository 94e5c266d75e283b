-- Pin history for a time range, with one pin before the range per consumer so a pin that
-- started earlier still shows as a bar from the range's start.
WITH ranked AS (
    SELECT *, row_number() OVER (PARTITION BY account, stream, consumer
                                 ORDER BY ts DESC, CASE event WHEN 'unpinned' THEN 0 ELSE 1 END DESC) AS back
    FROM pin_events WHERE ts < $since
)
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source
FROM pin_events WHERE ts >= $since AND ts <= $until
UNION ALL
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source
FROM ranked WHERE back = 1 AND event = 'pinned'
ORDER BY account, stream, consumer, ts, CASE event WHEN 'unpinned' THEN 0 ELSE 1 END;
