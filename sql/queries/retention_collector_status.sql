-- One row per collector process (host:pid): those silent since the cutoff are gone for good.
DELETE FROM collector_status
WHERE collector <> $self AND coalesce(last_cycle_at, started_at) < $cutoff;
