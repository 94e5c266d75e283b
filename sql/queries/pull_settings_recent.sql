-- The pull settings announced since $since, for the collector's config findings after a restart.
SELECT worker_key, account, stream, consumer, name, host, pid, version, client_id, server_id, group_name, policy,
       expires_ns, batch, min_pending, min_ack_pending, priority, no_wait, verification, verification_note,
       first_seen_at, received_at
FROM pull_settings WHERE received_at >= $since;
