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
