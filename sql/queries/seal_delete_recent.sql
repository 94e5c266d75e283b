-- The span just sealed, out of samples_recent (the same transaction: never in both, never in neither).
DELETE FROM samples_recent WHERE coalesce(sampled_at, ts) < $until
