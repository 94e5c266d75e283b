-- Decides, once, whether each recent PINNED advisory is vouched for by sampled state: confirmed
-- when a sample of the consumer showed its pin id; unconfirmed when the grace period (counted from
-- when jetwatch received it, not from the advisory's own, forgeable, timestamp) passed without one.
INSERT OR IGNORE INTO pin_confirmations
WITH open AS (
    SELECT a.id, a.account, a.stream, a.consumer, a.pinned_id, a.received_at
    FROM advisories a
    WHERE a.kind = 'consumer_group_pinned' AND a.received_at > $horizon
      AND NOT EXISTS (SELECT 1 FROM pin_confirmations c WHERE c.advisory_id = a.id)
),
seen AS (
    SELECT DISTINCT o.id
    FROM open o JOIN samples s
      ON s.account = o.account AND s.stream = o.stream AND s.consumer = o.consumer AND s.pinned_id = o.pinned_id
    WHERE s.ts > $horizon
)
SELECT o.id, CASE WHEN seen.id IS NOT NULL THEN 'confirmed' ELSE 'unconfirmed' END, $now
FROM open o LEFT JOIN seen USING (id)
WHERE seen.id IS NOT NULL OR o.received_at <= $cutoff;
