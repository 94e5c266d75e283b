SELECT actor, origin, action, account, stream, consumer, group_name, CAST(parameters AS VARCHAR) AS parameters, phase
FROM audit WHERE action_id = $action_id ORDER BY seq;
