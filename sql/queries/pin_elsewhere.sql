-- Another consumer that a pinned advisory or the live state shows with pin $pin_id: an announcement of
-- that pin on $account/$stream/$consumer claims a pin that is not its consumer's. NULL-free: no rows.
SELECT account, stream, consumer FROM (
    SELECT account, stream, consumer FROM pin_events WHERE event = 'pinned' AND pinned_id = $pin_id
    UNION ALL
    SELECT account, stream, consumer FROM consumer_current WHERE pinned_id = $pin_id
)
WHERE NOT (account IS NOT DISTINCT FROM $account AND stream = $stream AND consumer = $consumer)
LIMIT 1;
