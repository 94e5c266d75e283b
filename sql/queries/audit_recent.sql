-- The newest audit rows. `outside_chain`: a row without a chain position that is not from before
-- the chain (the rule of audit_outside_chain.sql): it was put in around the chain, and no page may
-- show it as an action.
SELECT ts, actor, origin, action, account, stream, consumer, group_name, parameters, outcome, reply, phase, action_id,
       coalesce(seq IS NULL
                AND (ts >= (SELECT min(applied_at) FROM schema_version WHERE version = 4)
                     OR rowid > (SELECT min(rowid) FROM audit WHERE seq IS NOT NULL)), false) AS outside_chain
FROM audit ORDER BY ts DESC, seq DESC NULLS LAST LIMIT $limit;
