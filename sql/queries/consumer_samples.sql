-- One consumer's raw samples: the cycles not sealed yet, then its sealed rows found by its number,
-- so that the zone maps of samples_sealed skip every other consumer's row groups. The number alone
-- names the consumer there (sealing gave its rows that number, and a number is never reused): no
-- comparison of names on every row the skipped-to row groups hold.
SELECT ts, num_pending, num_ack_pending, num_waiting, num_redelivered, delivered_consumer_seq,
       delivered_stream_seq, ack_floor_consumer_seq, ack_floor_stream_seq, paused, pinned_id,
       pinned_ts, created, leader, oldest_unacked_age_seconds, oldest_unacked_age_kind,
       oldest_undelivered_age_seconds, oldest_undelivered_age_kind
FROM (
    SELECT * EXCLUDE (sampled_at, cycle) FROM samples_recent
    WHERE account = $account AND stream = $stream AND consumer = $consumer AND ts >= $since AND ts <= $until
    UNION ALL BY NAME
    SELECT * EXCLUDE (cid) FROM samples_sealed
    WHERE cid = (SELECT cid FROM consumer_ids WHERE account = $account AND stream = $stream AND consumer = $consumer)
      AND ts >= $since AND ts <= $until
)
ORDER BY ts;
