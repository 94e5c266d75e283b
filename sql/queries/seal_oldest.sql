-- The oldest and newest cycles not sealed yet, by the collector's clock (a row written before
-- migration 8 by its own time; NULL: nothing to seal).
SELECT min(coalesce(sampled_at, ts)), max(coalesce(sampled_at, ts)) FROM samples_recent;
