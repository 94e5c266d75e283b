-- The held rows this cycle replaces: those of the accounts it sampled, but what $kept names (account
-- and stream, or account, stream and consumer, joined by chr(31)): a stream whose listing failed,
-- an entry that was rejected, which keep their last known state.
DELETE FROM current_held
WHERE list_contains($accounts, account)
  AND NOT list_contains($kept::VARCHAR[], concat_ws(chr(31), account, stream))
  AND NOT list_contains($kept::VARCHAR[], concat_ws(chr(31), account, stream, consumer));
