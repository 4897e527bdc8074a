-- The body of each webhook delivery that started runs, stored once and
-- referred to by its runs (their record's "delivery": {id, hook}) instead
-- of being copied into every run's trigger. Written in the transaction
-- that commits the delivery's claims and runs.
CREATE TABLE runbook_deliveries (
    id         text COLLATE "C" PRIMARY KEY,
    body       bytea NOT NULL,
    created_at timestamptz NOT NULL
);
