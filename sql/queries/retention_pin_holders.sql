-- Announced holders of pins past event retention, except a pin some consumer still holds.
DELETE FROM pin_holders WHERE received_at < $cutoff
  AND pin_id NOT IN (SELECT pinned_id FROM consumer_current WHERE pinned_id IS NOT NULL);
