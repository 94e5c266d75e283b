-- Migration 16: the facts that say why a pin moved, beside the pin events themselves.
--
-- `unpin_requests`: the unpin requests the server's API audit advisory ($JS.EVENT.ADVISORY.API) reported,
-- one row per advisory id. That subject carries every JetStream API call of the account with its request
-- and response bodies; the collector keeps only `$JS.API.CONSUMER.UNPIN.<stream>.<consumer>` calls and,
-- of each, who asked (the client as the server knows it: name, connection id, host, user, account) and
-- whether the server refused it (`error`, NULL when it was done). Nothing else of the advisory is stored.
CREATE TABLE IF NOT EXISTS unpin_requests (
    id              VARCHAR PRIMARY KEY,
    ts              TIMESTAMPTZ NOT NULL,
    received_at     TIMESTAMPTZ NOT NULL,
    account         VARCHAR,
    stream          VARCHAR NOT NULL,
    consumer        VARCHAR NOT NULL,
    group_name      VARCHAR,
    client_name     VARCHAR,
    client_id       BIGINT,
    client_host     VARCHAR,
    client_user     VARCHAR,
    client_account  VARCHAR,
    server          VARCHAR,
    error           VARCHAR
);

-- `pin_holder_exits`: for a pin that ended by `timeout`, what CONNZ said of the connection its holder
-- announced (pin_holders.client_id on server_id), asked right after the unpin: `state` is `open` (the
-- holder is still connected: it stopped pulling), `closed` (with the server's stop time and reason), or
-- `unknown` (CONNZ had no record of it, or could not be asked; `note` says which).
CREATE TABLE IF NOT EXISTS pin_holder_exits (
    pin_id      VARCHAR PRIMARY KEY,
    checked_at  TIMESTAMPTZ NOT NULL,
    state       VARCHAR NOT NULL,
    stopped_at  TIMESTAMPTZ,
    stop_reason VARCHAR,
    note        VARCHAR
);
