-- The span just sealed, out of samples_recent (the same transaction: never in both, never in neither);
-- the current cycle's rows stay, as the live state (sql/views.sql), and go with a later pass.
DELETE FROM samples_recent WHERE coalesce(sampled_at, ts) < $until AND cycle IS DISTINCT FROM (SELECT cycle FROM current_cycle)
