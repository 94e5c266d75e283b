INSERT INTO silences (silence_id, account, stream, consumer, verdict, level, note, actor, created_at, expires_at)
VALUES ($silence_id, $account, $stream, $consumer, $verdict, $level, $note, $actor, $created_at, $expires_at);
