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
