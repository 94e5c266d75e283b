-- One pin announcement, checked: it replaces the stored one for its pin id unless that one is verified
-- and this one is not (a forged announcement never overwrites the real holder).
INSERT INTO pin_holders (pin_id, account, stream, consumer, group_name, name, host, pid, version, client_id,
                         server_id, verification, verification_note, received_at)
VALUES ($pin_id, $account, $stream, $consumer, $group_name, $name, $host, $pid, $version, $client_id,
        $server_id, $verification, $verification_note, $received_at)
ON CONFLICT (pin_id) DO UPDATE SET
    account = excluded.account, stream = excluded.stream, consumer = excluded.consumer,
    group_name = excluded.group_name, name = excluded.name, host = excluded.host, pid = excluded.pid,
    version = excluded.version, client_id = excluded.client_id, server_id = excluded.server_id,
    verification = excluded.verification, verification_note = excluded.verification_note,
    received_at = excluded.received_at
WHERE pin_holders.verification <> 'verified' OR excluded.verification = 'verified';
