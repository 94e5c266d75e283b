-- Migration 13: what the stream said of each message a consumer dropped (MAX_DELIVERIES and
-- MSG_TERMINATED advisories carry only its stream sequence). One row per message, read once while
-- the stream still has it: `state` is `found` (subject and stored time read), `gone` (the stream no
-- longer has it, or the stream itself is gone), or `refused` (the read was refused or unanswered;
-- `note` says how). Keyed by stream sequence: one read serves every consumer that dropped it.
CREATE TABLE IF NOT EXISTS dropped_message_reads (
    account    VARCHAR NOT NULL,
    stream     VARCHAR NOT NULL,
    stream_seq BIGINT NOT NULL,
    state      VARCHAR NOT NULL,
    subject    VARCHAR,
    stored_at  TIMESTAMPTZ,
    note       VARCHAR,
    read_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (account, stream, stream_seq)
);
