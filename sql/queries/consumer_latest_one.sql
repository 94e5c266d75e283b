-- One consumer's live state with its limits and its pin's announced holder (the Consumer page: never
-- every consumer's row).
SELECT l.*, h.name AS holder_name, h.verification AS holder_verification, h.verification_note AS holder_note,
       h.host AS holder_host, h.pid AS holder_pid, h.version AS holder_version
FROM consumer_latest l
LEFT JOIN pin_holders h ON h.pin_id = l.pinned_id AND h.account IS NOT DISTINCT FROM l.account AND h.stream = l.stream
          AND h.consumer = l.consumer
WHERE ($account IS NULL OR l.account = $account) AND l.stream = $stream AND l.consumer = $consumer;
