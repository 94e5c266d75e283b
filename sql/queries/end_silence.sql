UPDATE silences SET ended_at = $ended_at, end_reason = $end_reason
WHERE silence_id = $silence_id AND ended_at IS NULL;
