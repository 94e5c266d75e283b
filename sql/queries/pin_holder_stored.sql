-- The holder stored for one consumer's pin, as /metrics labels it: name and how it was checked.
SELECT name, verification FROM pin_holders
WHERE account IS NOT DISTINCT FROM $account AND stream = $stream AND consumer = $consumer AND pin_id = $pin_id;
