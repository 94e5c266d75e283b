SELECT ts, actor, origin, action, account, stream, consumer, group_name, parameters, outcome, reply, phase, action_id
FROM audit ORDER BY ts DESC, seq DESC NULLS LAST LIMIT $limit;
