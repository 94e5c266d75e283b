-- Every pin event and every consumer deletion: pin sessions are recomputed over all of them.
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source
FROM pin_session_events;
