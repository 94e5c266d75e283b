-- Migration 14: silences. An operator acknowledges a consumer's current verdict for a bounded time
-- with a note: the verdict stays shown (silenced is an annotation beside it), its alerts are held
-- back until `expires_at` or until the verdict worsens (another alerting verdict than `verdict`).
-- The collector ends a silence once either happens (`ended_at`, `end_reason`), in the cycle that
-- saw it, and audits the end; a silence set again on the same consumer replaces the open one.
-- `silence_id` is the action id of the audited `silence` action that set it.
CREATE TABLE IF NOT EXISTS silences (
    silence_id  VARCHAR PRIMARY KEY,
    account     VARCHAR NOT NULL,
    stream      VARCHAR NOT NULL,
    consumer    VARCHAR NOT NULL,
    verdict     VARCHAR NOT NULL,
    level       VARCHAR NOT NULL,
    note        VARCHAR NOT NULL,
    actor       VARCHAR NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    ended_at    TIMESTAMPTZ,
    end_reason  VARCHAR
);
