-- One pin announcement, checked, for its own consumer (holder_key: account, stream, consumer, pin id).
-- It replaces the stored one unless that one is verified and this one is not from the same connection,
-- verified (a forgery, or another real connection claiming the pin, never overwrites the real holder).
-- Returns the holder stored for the key afterwards, whichever it is.
INSERT INTO pin_holders (holder_key, pin_id, account, stream, consumer, group_name, name, host, pid, version,
                         client_id, server_id, verification, verification_note, received_at)
VALUES (to_json([$account::VARCHAR, $stream::VARCHAR, $consumer::VARCHAR, $pin_id::VARCHAR])::VARCHAR,
        $pin_id, $account, $stream, $consumer, $group_name, $name, $host, $pid, $version, $client_id,
        $server_id, $verification, $verification_note, $received_at)
ON CONFLICT (holder_key) DO UPDATE SET
    group_name = excluded.group_name, name = excluded.name, host = excluded.host, pid = excluded.pid,
    version = excluded.version, client_id = excluded.client_id, server_id = excluded.server_id,
    verification = excluded.verification, verification_note = excluded.verification_note,
    received_at = excluded.received_at
WHERE pin_holders.verification <> 'verified'
   OR (excluded.verification = 'verified' AND excluded.name = pin_holders.name
       AND excluded.client_id IS NOT DISTINCT FROM pin_holders.client_id
       AND excluded.server_id IS NOT DISTINCT FROM pin_holders.server_id);
