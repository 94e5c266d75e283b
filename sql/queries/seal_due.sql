-- How many samples a pass seals.
SELECT count(*) FROM samples_recent WHERE coalesce(sampled_at, ts) < $until AND cycle IS DISTINCT FROM (SELECT cycle FROM current_cycle);
