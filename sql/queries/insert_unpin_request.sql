-- One unpin request the server's API audit advisory reported; an advisory redelivered is stored once.
INSERT OR IGNORE INTO unpin_requests (id, ts, received_at, account, stream, consumer, group_name, client_name,
                                      client_id, client_host, client_user, client_account, server, error)
VALUES ($id, $ts, $received_at, $account, $stream, $consumer, $group_name, $client_name, $client_id,
        $client_host, $client_user, $client_account, $server, $error);
