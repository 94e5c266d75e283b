INSERT INTO rejects VALUES ($ts, $origin, $subject, $error, $raw);
