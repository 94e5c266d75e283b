-- Pin history for a time range (pin events and consumer deletions), with one pin before the
-- range per consumer so a pin that started earlier still shows as a bar from the range's start.
-- At one instant a deletion comes first, then an unpin, then a pin. $account, $stream and
-- $consumer NULL: every consumer; set: that one only (the Consumer page reads no other; $account
-- NULL: in whichever account).
WITH ranked AS (
    SELECT *, row_number() OVER (PARTITION BY account, stream, consumer
                                 ORDER BY ts DESC, CASE event WHEN 'deleted' THEN 0 WHEN 'unpinned' THEN 1 ELSE 2 END DESC) AS back
    FROM pin_session_events WHERE ts < $since AND ($consumer IS NULL OR (($account IS NULL OR account = $account) AND stream = $stream AND consumer = $consumer))
)
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source, vouched
FROM pin_session_events WHERE ts >= $since AND ts <= $until
  AND ($consumer IS NULL OR (($account IS NULL OR account = $account) AND stream = $stream AND consumer = $consumer))
UNION ALL
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source, vouched
FROM ranked WHERE back = 1 AND event = 'pinned'
ORDER BY account, stream, consumer, ts, CASE event WHEN 'deleted' THEN 0 WHEN 'unpinned' THEN 1 ELSE 2 END;
