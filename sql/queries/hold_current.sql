-- The previous cycle's rows this cycle does not replace (an account it did not sample, what $kept
-- names), copied to current_held before this cycle becomes the current one.
INSERT INTO current_held BY NAME
SELECT * EXCLUDE (sampled_at, cycle) FROM samples_recent
WHERE cycle = (SELECT cycle FROM current_cycle)
  AND (NOT list_contains($accounts, account)
       OR list_contains($kept::VARCHAR[], concat_ws(chr(31), account, stream))
       OR list_contains($kept::VARCHAR[], concat_ws(chr(31), account, stream, consumer)));
