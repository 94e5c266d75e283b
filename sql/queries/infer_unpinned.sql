-- Records the unpin that no advisory reported: a pin followed by another pin with no unpinned
-- between (a consumer leader change clears the pin silently), or a pin that sampled state no
-- longer shows. The id is derived from the pin it closes, so it is recorded once.
INSERT OR IGNORE INTO inferred_pin_events
WITH ordered AS (
    SELECT account, stream, consumer, group_name, event, pinned_id, ts,
           lead(event) OVER w AS next_event,
           lead(ts) OVER w AS next_ts,
           lead(pinned_id) OVER w AS next_pinned_id
    FROM pin_events
    WINDOW w AS (PARTITION BY account, stream, consumer
                 ORDER BY ts, CASE event WHEN 'unpinned' THEN 0 ELSE 1 END)
),
open_pins AS (
    SELECT * FROM ordered
    WHERE event = 'pinned'
      AND (next_event IS NULL OR (next_event = 'pinned' AND next_pinned_id IS DISTINCT FROM pinned_id))
),
evidence AS (
    SELECT o.*,
           (SELECT min(CASE WHEN s.pinned_id IS NOT NULL THEN least(s.pinned_ts, s.ts) ELSE s.ts END)
            FROM samples s
            WHERE s.ts > $horizon AND s.account = o.account AND s.stream = o.stream
              AND s.consumer = o.consumer AND s.ts > o.ts
              AND s.pinned_id IS DISTINCT FROM o.pinned_id
              AND (o.next_ts IS NULL OR s.ts <= o.next_ts)) AS first_seen
    FROM open_pins o
)
SELECT md5(concat_ws(chr(31), 'unpinned', account, stream, consumer, pinned_id)) AS id,
       greatest(coalesce(first_seen, next_ts), ts) AS ts,
       $now AS recorded_at, account, stream, consumer, group_name,
       'unpinned' AS event, NULL AS pinned_id, pinned_id AS closes_id,
       CASE WHEN next_ts IS NOT NULL THEN 'pinned again with no unpinned advisory between'
            ELSE 'sampled state no longer shows this pin' END AS why
FROM evidence
WHERE (next_ts IS NOT NULL AND next_ts <= $cutoff)
   OR (next_ts IS NULL AND first_seen IS NOT NULL AND first_seen <= $cutoff);
