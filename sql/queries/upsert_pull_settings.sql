-- One pull-settings announcement, checked: the latest of its connection replaces the one stored,
-- keeping when that connection was first seen.
INSERT INTO pull_settings (worker_key, account, stream, consumer, name, host, pid, version, client_id, server_id,
                           group_name, policy, expires_ns, batch, min_pending, min_ack_pending, priority, no_wait,
                           verification, verification_note, first_seen_at, received_at)
VALUES ($worker_key, $account, $stream, $consumer, $name, $host, $pid, $version, $client_id, $server_id,
        $group_name, $policy, $expires_ns, $batch, $min_pending, $min_ack_pending, $priority, $no_wait,
        $verification, $verification_note, $received_at, $received_at)
ON CONFLICT (worker_key) DO UPDATE SET
    host = excluded.host, pid = excluded.pid, version = excluded.version, group_name = excluded.group_name,
    policy = excluded.policy, expires_ns = excluded.expires_ns, batch = excluded.batch,
    min_pending = excluded.min_pending, min_ack_pending = excluded.min_ack_pending, priority = excluded.priority,
    no_wait = excluded.no_wait, verification = excluded.verification,
    verification_note = excluded.verification_note, received_at = excluded.received_at;
