-- Migration 22: which limit a projected loss comes from (health/loss.py): 'max_age', 'max_msgs' or
-- 'max_bytes'; for a loss already made, the limits the stream has ('max_age or max_msgs'); NULL
-- with no loss in sight.
ALTER TABLE samples_recent ADD COLUMN IF NOT EXISTS loss_limit VARCHAR;
ALTER TABLE samples_sealed ADD COLUMN IF NOT EXISTS loss_limit VARCHAR;
ALTER TABLE current_held ADD COLUMN IF NOT EXISTS loss_limit VARCHAR;
