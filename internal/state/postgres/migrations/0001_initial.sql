-- The tables of runbook's PostgreSQL state store.
--
-- Each record is kept whole as JSON (type json, not jsonb: json keeps the
-- text as written, so nanosecond times, number formats and "\u0000" in a
-- webhook payload round-trip exactly), beside the columns that listings
-- filter and sort on. Identifiers and keys use COLLATE "C": byte order,
-- whatever the database's locale, as the bbolt store orders them, and
-- prefix searches (LIKE 'abc%') can use their indexes.

-- One row per run. record is the state.Run without its playbook snapshot.
-- The snapshot is kept once per hash in runbook_snapshots; the snapshot
-- column holds it only for a run without a hash or whose hash was first
-- stored with another source. last_seq is the run's last event number.
CREATE TABLE runbook_runs (
    id              text COLLATE "C" PRIMARY KEY,
    playbook        text COLLATE "C" NOT NULL,
    status          text COLLATE "C" NOT NULL,
    parent_id       text COLLATE "C" NOT NULL DEFAULT '',
    trigger_type    text COLLATE "C" NOT NULL DEFAULT '',
    trigger_key     text COLLATE "C" NOT NULL DEFAULT '',
    concurrency_key text COLLATE "C" NOT NULL DEFAULT '',
    owner           text COLLATE "C" NOT NULL DEFAULT '',
    -- created_ns (Unix nanoseconds) is the listing order, exact where a
    -- timestamptz keeps microseconds; the timestamps are for people and
    -- time-range queries.
    created_ns      bigint NOT NULL,
    created_at      timestamptz NOT NULL,
    started_at      timestamptz,
    ended_at        timestamptz,
    hash            text COLLATE "C" NOT NULL DEFAULT '',
    snapshot        bytea,
    record          json NOT NULL,
    last_seq        bigint NOT NULL DEFAULT 0
);

-- Newest first, with or without a filter: each index ends with the
-- listing order, so a page is an index range, and the next page starts
-- after (created_ns, id) of the last run of the previous one.
CREATE INDEX runbook_runs_created ON runbook_runs (created_ns, id);
CREATE INDEX runbook_runs_status ON runbook_runs (status, created_ns, id);
CREATE INDEX runbook_runs_playbook ON runbook_runs (playbook, created_ns, id);
CREATE INDEX runbook_runs_parent ON runbook_runs (parent_id, created_ns, id) WHERE parent_id <> '';
-- A webhook unit's run is found by its trigger key after a crash.
CREATE INDEX runbook_runs_trigger_key ON runbook_runs (trigger_key, created_ns, id) WHERE trigger_key <> '';
CREATE INDEX runbook_runs_started ON runbook_runs (started_at) WHERE started_at IS NOT NULL;

-- Playbook sources by hash, shared by every run of the same source.
CREATE TABLE runbook_snapshots (
    hash   text COLLATE "C" PRIMARY KEY,
    source bytea NOT NULL
);

-- One row per step (or for_each item) of a run. ord, drawn when the step
-- is first saved, orders a run's steps as they were first saved.
CREATE TABLE runbook_steps (
    run_id  text COLLATE "C" NOT NULL REFERENCES runbook_runs (id) ON DELETE CASCADE,
    step_id text COLLATE "C" NOT NULL,
    ord     bigint GENERATED ALWAYS AS IDENTITY,
    status  text COLLATE "C" NOT NULL,
    record  json NOT NULL,
    PRIMARY KEY (run_id, step_id)
);

-- A run's append-only log. event is the state.Event without its Seq.
CREATE TABLE runbook_events (
    run_id text COLLATE "C" NOT NULL REFERENCES runbook_runs (id) ON DELETE CASCADE,
    seq    bigint NOT NULL,
    event  json NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE runbook_intents (
    run_id text COLLATE "C" NOT NULL REFERENCES runbook_runs (id) ON DELETE CASCADE,
    step   text COLLATE "C" NOT NULL,
    record json NOT NULL,
    PRIMARY KEY (run_id, step)
);

CREATE TABLE runbook_approvals (
    run_id text COLLATE "C" NOT NULL REFERENCES runbook_runs (id) ON DELETE CASCADE,
    step   text COLLATE "C" NOT NULL,
    record json NOT NULL,
    PRIMARY KEY (run_id, step)
);

-- Concurrency keys: the primary key is what makes a key held once.
CREATE TABLE runbook_locks (
    key     text COLLATE "C" PRIMARY KEY,
    owner   text COLLATE "C" NOT NULL,
    process text NOT NULL DEFAULT '',
    since   timestamptz NOT NULL,
    record  json NOT NULL
);

CREATE TABLE runbook_cursors (
    key   text COLLATE "C" PRIMARY KEY,
    value bytea NOT NULL
);

-- Deduplication keys (webhook deliveries, hooks, schedule slots): the
-- primary key is the exactly-once claim. A key is live until expires_at
-- (NULL: for good); value is what DedupSet attached (NULL: none).
CREATE TABLE runbook_dedup (
    key        text COLLATE "C" PRIMARY KEY,
    first_seen timestamptz NOT NULL,
    expires_at timestamptz,
    value      bytea
);
CREATE INDEX runbook_dedup_expires ON runbook_dedup (expires_at) WHERE expires_at IS NOT NULL;
