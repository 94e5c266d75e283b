-- Pin history for a time range (pin events and consumer deletions), with one pin before the
-- range per consumer so a pin that started earlier still shows as a bar from the range's start.
-- At one instant a deletion comes first, then an unpin, then a pin.
WITH ranked AS (
    SELECT *, row_number() OVER (PARTITION BY account, stream, consumer
                                 ORDER BY ts DESC, CASE event WHEN 'deleted' THEN 0 WHEN 'unpinned' THEN 1 ELSE 2 END DESC) AS back
    FROM pin_session_events WHERE ts < $since
)
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source
FROM pin_session_events WHERE ts >= $since AND ts <= $until
UNION ALL
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source
FROM ranked WHERE back = 1 AND event = 'pinned'
ORDER BY account, stream, consumer, ts, CASE event WHEN 'deleted' THEN 0 WHEN 'unpinned' THEN 1 ELSE 2 END;
