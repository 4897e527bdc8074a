-- Several `runbook serve` replicas on one database (state.Coordinator).

-- One row per replica (its process ID, "host/pid"), alive while
-- expires_at is in the future: renewed every third of the lease, set to
-- now at a graceful shutdown. The unfinished runs whose owner is a
-- replica past its expiry are taken over by the live replicas; a run
-- whose owner has no row here (a `runbook run` process) is not.
CREATE TABLE runbook_replicas (
    id         text COLLATE "C" PRIMARY KEY,
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

-- The run queue: unfinished top-level runs, oldest first.
CREATE INDEX runbook_runs_unfinished ON runbook_runs (created_ns, id)
    WHERE status IN ('pending', 'running', 'waiting', 'suspended') AND parent_id = '';

-- An approval answered on one replica wakes the run waiting on another,
-- and a cancel recorded on one stops the run executing on another,
-- whoever writes them (a replica, or the CLI against the database). The
-- notices go out when the writing transaction commits, on channels named
-- after the schema, so installations in different schemas of one
-- database do not hear each other.
CREATE FUNCTION runbook_notify_approval() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('runbook_approval:' || current_schema(), NEW.run_id);
    RETURN NULL;
END
$$;
CREATE TRIGGER runbook_approvals_notify AFTER INSERT OR UPDATE ON runbook_approvals
    FOR EACH ROW EXECUTE FUNCTION runbook_notify_approval();

CREATE FUNCTION runbook_notify_cancel() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('runbook_cancel:' || current_schema(), NEW.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER runbook_runs_notify_cancel AFTER UPDATE OF status ON runbook_runs
    FOR EACH ROW WHEN (NEW.status = 'cancelled' AND OLD.status <> 'cancelled')
    EXECUTE FUNCTION runbook_notify_cancel();
