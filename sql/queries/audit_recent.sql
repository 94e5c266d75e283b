SELECT ts, actor, origin, action, account, stream, consumer, group_name, parameters, outcome, reply
FROM audit ORDER BY ts DESC LIMIT $limit;
