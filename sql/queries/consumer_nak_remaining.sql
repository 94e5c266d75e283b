-- Messages the consumer naked since $since that it still owes (past its ack floor, not dropped), with
-- the delivery count of the latest nak and how many deliveries max_deliver leaves them (NULL: no
-- max_deliver, redelivered without end).
WITH naks AS (
    SELECT ts, TRY_CAST(json_extract_string(raw, '$.stream_seq') AS BIGINT) AS stream_seq,
           TRY_CAST(json_extract_string(raw, '$.deliveries') AS BIGINT) AS deliveries
    FROM advisories
    WHERE kind = 'nak' AND account = $account AND stream = $stream AND consumer = $consumer AND ts >= $since
    QUALIFY row_number() OVER (PARTITION BY stream_seq ORDER BY ts DESC, deliveries DESC) = 1
), mine AS (
    SELECT max_deliver, ack_floor_stream_seq FROM consumer_latest
    WHERE account = $account AND stream = $stream AND consumer = $consumer
)
SELECT n.ts AS last_nak, n.stream_seq, n.deliveries,
       CASE WHEN m.max_deliver > 0 THEN m.max_deliver END AS max_deliver,
       CASE WHEN m.max_deliver > 0 THEN greatest(m.max_deliver - n.deliveries, 0) END AS deliveries_left
FROM naks n LEFT JOIN mine m ON true
WHERE n.stream_seq IS NOT NULL AND n.stream_seq > coalesce(m.ack_floor_stream_seq, 0)
  AND n.stream_seq NOT IN (SELECT stream_seq FROM dropped_messages
                           WHERE account = $account AND stream = $stream AND consumer = $consumer)
ORDER BY deliveries_left NULLS LAST, n.ts DESC
LIMIT 50;
