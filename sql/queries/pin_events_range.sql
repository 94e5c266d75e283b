-- Pin history for a time range (pin events and consumer deletions), newest last. At one instant a
-- deletion comes first, then an unpin, then a pin. $account, $stream and $consumer NULL: every
-- consumer; set: that one only (the Consumer page reads no other; $account NULL: in whichever
-- account). A pin held across the range's start is a session (stage_pin_tail), not an event here.
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source, vouched
FROM pin_session_events WHERE ts >= $since AND ts <= $until
  AND ($consumer IS NULL OR (($account IS NULL OR account = $account) AND stream = $stream AND consumer = $consumer))
ORDER BY account, stream, consumer, ts, CASE event WHEN 'deleted' THEN 0 WHEN 'unpinned' THEN 1 ELSE 2 END;
