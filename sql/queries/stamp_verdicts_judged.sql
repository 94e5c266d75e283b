-- Every verdict judged afresh this cycle was judged now, changed or not; a held last known
-- verdict keeps the time it was last judged (its reason says so).
UPDATE verdicts_current SET judged_at = $now
WHERE NOT starts_with(reason, $last_known) AND judged_at < $now;
