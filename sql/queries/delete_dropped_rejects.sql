-- The one row per origin and minute that counts the rejects dropped over the budget is replaced
-- as the count grows (subject NULL marks it; its raw is a JSON summary of the reasons).
DELETE FROM rejects
WHERE ts = $ts AND origin = $origin AND subject IS NULL AND starts_with(error, 'dropped ');
