-- Operator actions on consumers in a time range, one row per action (its outcome, or its intent
-- while it has none yet), for the pin timeline's overlay: who did what, when, and how it went.
SELECT ts, actor, action, account, stream, consumer, group_name, outcome, action_id
FROM audit
WHERE ts >= $since AND ts <= $until AND stream <> '(dashboard)'
  AND (phase IS NULL OR phase <> 'intent'
       OR action_id NOT IN (SELECT action_id FROM audit WHERE phase = 'outcome' AND action_id IS NOT NULL))
ORDER BY ts;
