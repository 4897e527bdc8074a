-- The tables of runbook's PostgreSQL state store.
--
-- Each record is kept whole as JSON (type json, not jsonb: json keeps the
-- text as written, so nanosecond times, number formats and "\u0000" in a
-- webhook payload round-trip exactly), beside the columns that listings
-- filter and sort on. Identifiers and keys use COLLATE "C": byte order,
-- whatever the database's locale, as the bbolt store orders them, and
-- prefix searches (LIKE 'abc%') can use their indexes.
--
-- Notices (pg_notify) go out when the writing transaction commits, on
-- channels named after the schema, so installations in different schemas
-- of one database do not hear each other.

-- One row per run. record is the state.Run without its playbook snapshot.
-- The snapshot is kept once per hash in runbook_snapshots; the snapshot
-- column holds it only for a run without a hash or whose hash was first
-- stored with another source. last_seq is the run's last event number.
--
-- A run's row is rewritten while it runs: claimed (owner), then ended
-- (status, times, record). An update that changes no indexed column
-- keeps its indexes as they are (a heap-only tuple) when the new version
-- fits in the row's page: half of each page is left free for it, so a
-- claim rewrites no index entry. The end changes status, which indexes
-- below depend on, and takes a new entry in each index its new version
-- belongs to: as few as the queries need.
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
) WITH (fillfactor = 50);

-- Newest first, with or without a filter: each index ends with the
-- listing order, so a page is an index range, and the next page starts
-- after (created_ns, id) of the last run of the previous one.
CREATE INDEX runbook_runs_created ON runbook_runs (created_ns, id);
-- By status: every status but succeeded, which most runs end in and which
-- a listing finds by reading the newest runs (runbook_runs_created) and
-- skipping the others; a run that ends succeeded takes no entry here. A
-- listing of other statuses says status <> 'succeeded' too (listQuery),
-- so that a generic plan, which sees no parameter, still matches this
-- index's predicate.
CREATE INDEX runbook_runs_status ON runbook_runs (status, created_ns, id) WHERE status <> 'succeeded';
CREATE INDEX runbook_runs_playbook ON runbook_runs (playbook, created_ns, id);
CREATE INDEX runbook_runs_parent ON runbook_runs (parent_id, created_ns, id) WHERE parent_id <> '';
-- A webhook unit's run is found by its trigger key after a crash.
CREATE INDEX runbook_runs_trigger_key ON runbook_runs (trigger_key, created_ns, id) WHERE trigger_key <> '';
-- The run queue: unfinished top-level runs, oldest first.
CREATE INDEX runbook_runs_unfinished ON runbook_runs (created_ns, id)
    WHERE status IN ('pending', 'running', 'waiting', 'suspended') AND parent_id = '';
-- A schedule's overlap policy (skip, queue, replace) asks for the
-- unfinished top-level runs of its playbook on every replica
-- (Coordinator.Unfinished): an index of those runs by playbook, which
-- stays as small as the runs in flight however long the history.
CREATE INDEX runbook_runs_unfinished_playbook ON runbook_runs (playbook, created_ns, id)
    WHERE status IN ('pending', 'running', 'waiting', 'suspended') AND parent_id = '';

-- A cancel recorded on one replica (or by the CLI against the database)
-- stops the run executing on another.
CREATE FUNCTION runbook_notify_cancel() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('runbook_cancel:' || current_schema(), NEW.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER runbook_runs_notify_cancel AFTER UPDATE OF status ON runbook_runs
    FOR EACH ROW WHEN (NEW.status = 'cancelled' AND OLD.status <> 'cancelled')
    EXECUTE FUNCTION runbook_notify_cancel();

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

-- An approval answered on one replica (or by the CLI against the
-- database) wakes the run waiting on another. Only an answer that decides
-- the approval (a rejection, or the approval that completes `required`)
-- tells the replica holding the run: an answer that leaves approvals
-- missing has nothing to wake the run for (it would execute, find the
-- approval pending and park again), and the timeout is recorded by the
-- replica executing the run, which needs no notice.
CREATE FUNCTION runbook_notify_approval() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.record->>'pending' IS DISTINCT FROM 'true' AND NEW.record->>'timed_out' IS DISTINCT FROM 'true' THEN
        PERFORM pg_notify('runbook_approval:' || current_schema(), NEW.run_id);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER runbook_approvals_notify AFTER INSERT OR UPDATE ON runbook_approvals
    FOR EACH ROW EXECUTE FUNCTION runbook_notify_approval();

-- Concurrency keys: the primary key is what makes a key held once.
-- waited is set by whoever asked for the key while it was held.
CREATE TABLE runbook_locks (
    key     text COLLATE "C" PRIMARY KEY,
    owner   text COLLATE "C" NOT NULL,
    process text NOT NULL DEFAULT '',
    since   timestamptz NOT NULL,
    record  json NOT NULL,
    waited  boolean NOT NULL DEFAULT false
);

-- A concurrency key that was asked for while held, released anywhere,
-- wakes the runs queued on it in every replica at once
-- (state.NoticeKeyFreed), whoever deletes the lock row: a replica's run
-- ending, a cancel, the CLI. The notice carries the key. A key too long
-- for a notice's payload (8000 bytes) is sent empty: every key is tried
-- then. A key nobody asked for sends none: a transaction that notifies
-- holds PostgreSQL's one notify lock from its commit until it is flushed,
-- so that every release would wait for the one before.
CREATE FUNCTION runbook_notify_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF octet_length(OLD.key) < 7000 THEN
        PERFORM pg_notify('runbook_key:' || current_schema(), OLD.key);
    ELSE
        PERFORM pg_notify('runbook_key:' || current_schema(), '');
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER runbook_locks_notify_release AFTER DELETE ON runbook_locks
    FOR EACH ROW WHEN (OLD.waited) EXECUTE FUNCTION runbook_notify_key();

CREATE TABLE runbook_cursors (
    key   text COLLATE "C" PRIMARY KEY,
    value bytea NOT NULL
);

-- Schedule pauses (state.SchedulePause), by playbook and trigger index
-- (-1: every schedule trigger of the playbook); record is the pause.
CREATE TABLE runbook_schedule_pauses (
    playbook text COLLATE "C" NOT NULL,
    trigger  integer NOT NULL,
    record   json NOT NULL,
    PRIMARY KEY (playbook, trigger)
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

-- The body of each webhook delivery that started runs, stored once and
-- referred to by its runs (their record's "delivery": {id, hook}) instead
-- of being copied into every run's trigger. Written in the transaction
-- that commits the delivery's claims and runs.
CREATE TABLE runbook_deliveries (
    id         text COLLATE "C" PRIMARY KEY,
    body       bytea NOT NULL,
    created_at timestamptz NOT NULL
);

-- API tokens made by `runbook token create`, by name. record is the
-- state.Token (hash only, never the token).
CREATE TABLE runbook_tokens (
    name   text COLLATE "C" PRIMARY KEY,
    record json NOT NULL
);

-- The audit log, append-only: rows are deleted only by PruneAudit (an
-- explicit retention). record is the state.AuditRecord without its Seq.
CREATE TABLE runbook_audit (
    seq    bigserial PRIMARY KEY,
    at     timestamptz NOT NULL,
    record json NOT NULL
);
CREATE INDEX runbook_audit_at ON runbook_audit (at);

-- The web UI's sessions, by key: the SHA-256 of the session ID in the
-- browser's cookie (never the ID itself). record is the state.Session.
CREATE TABLE runbook_sessions (
    key     text COLLATE "C" PRIMARY KEY,
    expires timestamptz NOT NULL,
    record  json NOT NULL
);
CREATE INDEX runbook_sessions_expires ON runbook_sessions (expires);

-- The steps' output (state.StepOutput): what shell commands print and the
-- API calls steps make, outside the run and step records, so a chatty
-- step inflates neither. One row per chunk: the consecutive lines of one
-- step attempt that one append wrote, as a state.OutputChunk (a row and
-- a JSON object per line cost ten times the text of short lines). seq
-- and last_seq number its first and last line. runbook_output_runs holds
-- a run's last line number: an append reserves its numbers there in one
-- statement (the run's row is locked for the append's transaction). Both
-- go with the run (foreign keys cascade).
CREATE TABLE runbook_output_runs (
    run_id   text COLLATE "C" PRIMARY KEY REFERENCES runbook_runs (id) ON DELETE CASCADE,
    last_seq bigint NOT NULL
);

CREATE TABLE runbook_output (
    run_id   text COLLATE "C" NOT NULL REFERENCES runbook_runs (id) ON DELETE CASCADE,
    seq      bigint NOT NULL,
    last_seq bigint NOT NULL,
    step     text COLLATE "C" NOT NULL,
    chunk    json NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- A step's output (runs logs RUN STEP) is an index range.
CREATE INDEX runbook_output_step ON runbook_output (run_id, step, seq);

-- The replicas on one database (state.Coordinator): the `runbook serve`
-- processes (kind serve) and the `runbook run` processes, and `runs
-- approve|retry|cancel` continuing a run, which are short-lived replicas
-- (kind run) that execute only their own runs.
--
-- One row per replica (its process ID, "host/pid@start"), alive while
-- expires_at is in the future: renewed every third of the lease, set to
-- now when it leaves. The unfinished runs whose owner is a serve replica
-- past its expiry are taken over by the live serve replicas; those of a
-- run replica past its expiry only when the run's playbook says
-- take_over: true or the replicas are told to take every such run
-- (server.take_over_run_processes).
CREATE TABLE runbook_replicas (
    id         text COLLATE "C" PRIMARY KEY,
    kind       text COLLATE "C" NOT NULL CHECK (kind IN ('serve', 'run')),
    started_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

-- Named leases with a term (the scheduler's leader): taken when free or
-- expired (the term goes up), renewed only by the holder of the same term.
CREATE TABLE runbook_leases (
    name       text COLLATE "C" PRIMARY KEY,
    holder     text COLLATE "C" NOT NULL,
    term       bigint NOT NULL,
    expires_at timestamptz NOT NULL
);

-- Fencing (state.Fence): a write made for a run's executor checks, in its
-- own transaction, that the top-level run fence_root is still owned by
-- fence_owner, and fails with SQLSTATE RB001 (the owner now in DETAIL)
-- when another replica took the run over, so the whole write is undone.
-- The root's row is locked until the write commits, so a claim (an
-- update of owner) waits for a write in flight and a write after the
-- claim sees the new owner: FOR NO KEY UPDATE when the write updates the
-- root itself (no lock upgrade, no deadlock between two writers of one
-- run), FOR SHARE for a sub-playbook run's write (its siblings' writes do
-- not wait for one another). An unknown root passes: the write then
-- reports the run not found, as an unfenced one does.
CREATE FUNCTION runbook_fence(fence_run text, fence_root text, fence_owner text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    cur text;
BEGIN
    IF fence_run = fence_root THEN
        SELECT owner INTO cur FROM runbook_runs WHERE id = fence_root FOR NO KEY UPDATE;
    ELSE
        SELECT owner INTO cur FROM runbook_runs WHERE id = fence_root FOR SHARE;
    END IF;
    IF FOUND AND cur IS DISTINCT FROM fence_owner THEN
        RAISE EXCEPTION 'run % is owned by % now, not by %', fence_root, cur, fence_owner
            USING ERRCODE = 'RB001', DETAIL = cur;
    END IF;
END
$$;

-- The notification outbox (state.NotificationStore): one row per event
-- and channel, key unique, so that whichever replicas observe an event it
-- is enqueued once (INSERT ... ON CONFLICT DO NOTHING). due_at is when a
-- sender may next take the row: its next attempt, or the end of a
-- sender's claim (NULL once sent); senders claim due rows FOR UPDATE SKIP
-- LOCKED. record is the state.Notification.
CREATE TABLE runbook_notifications (
    key        text COLLATE "C" PRIMARY KEY,
    run_id     text COLLATE "C" NOT NULL DEFAULT '',
    status     text COLLATE "C" NOT NULL,
    created_ns bigint NOT NULL,
    due_at     timestamptz,
    sent_at    timestamptz,
    claimed_by text COLLATE "C" NOT NULL DEFAULT '',
    record     json NOT NULL
);
CREATE INDEX runbook_notifications_created ON runbook_notifications (created_ns, key);
CREATE INDEX runbook_notifications_due ON runbook_notifications (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX runbook_notifications_run ON runbook_notifications (run_id, created_ns, key) WHERE run_id <> '';

-- Run pauses (runbook pause): each holds the runs of the playbooks it
-- selects at their next step boundary. One pause per selector (a name
-- pattern, or a label): one resume lifts it. Recording or deleting one
-- tells every replica (runbook_pause), which reads them again and wakes
-- the runs a lifted pause held.
CREATE TABLE runbook_run_pauses (
    id       text COLLATE "C" PRIMARY KEY,
    selector text COLLATE "C" NOT NULL UNIQUE,
    at_ns    bigint NOT NULL,
    record   json NOT NULL
);

CREATE FUNCTION runbook_notify_pause() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('runbook_pause:' || current_schema(), COALESCE(NEW.id, OLD.id));
    RETURN NULL;
END
$$;
CREATE TRIGGER runbook_run_pauses_notify AFTER INSERT OR DELETE ON runbook_run_pauses
    FOR EACH ROW EXECUTE FUNCTION runbook_notify_pause();

-- The runbook agents (state.AgentStore): their sessions, the step
-- attempts placed on them and the mail between replicas about those
-- attempts, so that any replica answers any agent. Leases are on the
-- database's clock. A session's record holds what does not change (name,
-- labels, capacity, its limits per playbook, its public key); an
-- assignment's record its step type, the labels it asks for and its run's
-- playbook, which the limits select. A step has at most one assignment not
-- withdrawn: a replica that takes a run over finds the one placed for it.
-- Placement takes an advisory lock (internal/state/postgres/agent.go)
-- and counts the assignments each session holds (by playbook), so
-- capacity and limits hold across replicas. sealed,
-- result and the mail's body are sealed to their recipient's ephemeral
-- key (nacl box): no secret is stored in clear. The replicas tell each
-- other on the runbook_agent channel (sent by internal/agent).
CREATE TABLE runbook_agent_sessions (
    id         text COLLATE "C" PRIMARY KEY,
    registered timestamptz NOT NULL,
    seen       timestamptz NOT NULL,
    expires    timestamptz NOT NULL,
    draining   boolean NOT NULL DEFAULT false,
    turn       bigint NOT NULL DEFAULT 0,
    record     json NOT NULL
);

CREATE TABLE runbook_agent_assignments (
    id        text COLLATE "C" PRIMARY KEY,
    seq       bigserial NOT NULL,
    run_id    text COLLATE "C" NOT NULL,
    step      text COLLATE "C" NOT NULL,
    attempt   integer NOT NULL,
    owner     text COLLATE "C" NOT NULL,
    owner_key bytea NOT NULL,
    created   timestamptz NOT NULL,
    session   text COLLATE "C" NOT NULL DEFAULT '',
    agent     text NOT NULL DEFAULT '',
    placed    timestamptz,
    sealed    bytea,
    delivered boolean NOT NULL DEFAULT false,
    withdrawn boolean NOT NULL DEFAULT false,
    result    bytea,
    lost      text NOT NULL DEFAULT '',
    resend    boolean NOT NULL DEFAULT false,
    record    json NOT NULL
);
CREATE UNIQUE INDEX runbook_agent_assignments_step ON runbook_agent_assignments (run_id, step) WHERE NOT withdrawn;
CREATE INDEX runbook_agent_assignments_waiting ON runbook_agent_assignments (owner, seq) WHERE session = '';
CREATE INDEX runbook_agent_assignments_session ON runbook_agent_assignments (session) WHERE session <> '';

CREATE TABLE runbook_agent_mail (
    seq       bigserial PRIMARY KEY,
    recipient text COLLATE "C" NOT NULL,
    body      bytea NOT NULL
);
CREATE INDEX runbook_agent_mail_recipient ON runbook_agent_mail (recipient, seq);
