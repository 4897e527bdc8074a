-- A concurrency key released anywhere wakes the runs queued on it in
-- every replica at once (state.NoticeKeyFreed), whoever deletes the lock
-- row: a replica's run ending, a cancel, the CLI. The notice carries the
-- key, on a channel named after the schema, and goes out when the
-- deleting transaction commits. A key too long for a notice's payload
-- (8000 bytes) is sent empty: every key is tried then.
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
    FOR EACH ROW EXECUTE FUNCTION runbook_notify_key();
