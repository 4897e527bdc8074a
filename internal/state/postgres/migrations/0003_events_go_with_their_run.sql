-- A run's events go with it through this trigger instead of a foreign key.
--
-- Every statement that inserts events inserts or updates their run's row
-- in the same statement first (a run's write with its events, a
-- delivery's runs, an import): a missing run inserts no event, and the
-- run's row stays locked until the events commit. The foreign key
-- repeated that check for each event row, and it was a tenth of
-- PostgreSQL's processor time a run (docs/performance.md). A replica of
-- the previous release writes its events the same way.
--
-- The trigger deletes a run's events after any statement that deletes
-- runs, as the foreign key's cascade did: runbook's DeleteRun, a
-- replica of the previous release, or SQL by hand. Its DELETE reads the
-- events committed while the run's deletion waited for the row.
ALTER TABLE runbook_events DROP CONSTRAINT runbook_events_run_id_fkey;

CREATE FUNCTION runbook_delete_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM runbook_events e USING gone g WHERE e.run_id = g.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER runbook_runs_delete_events AFTER DELETE ON runbook_runs
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION runbook_delete_events();
