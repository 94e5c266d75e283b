-- Rows without a chain position that are not from before the chain. Only rows written before the
-- store was upgraded to the chain (migration 4) may lack one, and those come before every chained
-- row, in time and in the table's own order; any other was put in around the chain, by hand or by
-- a forger. audit_recent.sql marks the same rows (`outside_chain`).
SELECT epoch_us(a.ts) AS ts_us, a.actor, a.action, a.stream, a.consumer, a.outcome
FROM audit a
WHERE a.seq IS NULL
  AND (a.ts >= (SELECT min(applied_at) FROM schema_version WHERE version = 4)
       OR a.rowid > (SELECT min(rowid) FROM audit WHERE seq IS NOT NULL))
ORDER BY a.ts;
