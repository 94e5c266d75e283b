-- The oldest and newest cycles not sealed yet, by the collector's clock (a row written before
-- migration 8 by its own time; NULL: nothing to seal). The oldest of those a pass may move: not the
-- current cycle's, which stay as the live state.
SELECT min(coalesce(sampled_at, ts)) FILTER (WHERE cycle IS DISTINCT FROM (SELECT cycle FROM current_cycle)),
       max(coalesce(sampled_at, ts))
FROM samples_recent;
