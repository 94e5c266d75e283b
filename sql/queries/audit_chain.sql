SELECT seq, epoch_us(ts) AS ts_us, actor, origin, action, account, stream, consumer, group_name,
       CAST(parameters AS VARCHAR) AS parameters, outcome, reply, action_id, phase, prev_hash, row_hash
FROM audit WHERE seq IS NOT NULL ORDER BY seq;
