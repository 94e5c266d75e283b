INSERT INTO audit (ts, actor, origin, action, account, stream, consumer, group_name, parameters, outcome, reply,
                   seq, action_id, phase, prev_hash, row_hash)
VALUES ($ts, $actor, $origin, $action, $account, $stream, $consumer, $group_name, $parameters, $outcome, $reply,
        $seq, $action_id, $phase, $prev_hash, $row_hash);
