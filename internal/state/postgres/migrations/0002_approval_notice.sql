-- Only an answer that decides an approval (a rejection, or the approval
-- that completes `required`) tells the replica holding the run: an answer
-- that leaves approvals missing has nothing to wake the run for (it would
-- execute, find the approval pending and park again), and the timeout is
-- recorded by the replica executing the run, which needs no notice.
CREATE OR REPLACE FUNCTION runbook_notify_approval() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.record->>'pending' IS DISTINCT FROM 'true' AND NEW.record->>'timed_out' IS DISTINCT FROM 'true' THEN
        PERFORM pg_notify('runbook_approval:' || current_schema(), NEW.run_id);
    END IF;
    RETURN NULL;
END
$$;
