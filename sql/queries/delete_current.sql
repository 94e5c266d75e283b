-- The latest cycle replaces the live state of the accounts it covers: consumers gone from it stop
-- showing. What $kept names (account and stream, or account, stream and consumer, joined by
-- chr(31)) keeps its last known state: a stream whose listing failed, an entry that was rejected.
DELETE FROM consumer_current
WHERE list_contains($accounts, account)
  AND NOT list_contains($kept::VARCHAR[], concat_ws(chr(31), account, stream))
  AND NOT list_contains($kept::VARCHAR[], concat_ws(chr(31), account, stream, consumer));
