-- What CONNZ said of a pin holder's connection after its pin timed out; a later check replaces an earlier one.
INSERT INTO pin_holder_exits (pin_id, checked_at, state, stopped_at, stop_reason, note)
VALUES ($pin_id, $checked_at, $state, $stopped_at, $stop_reason, $note)
ON CONFLICT (pin_id) DO UPDATE SET checked_at = excluded.checked_at, state = excluded.state,
    stopped_at = excluded.stopped_at, stop_reason = excluded.stop_reason, note = excluded.note;
