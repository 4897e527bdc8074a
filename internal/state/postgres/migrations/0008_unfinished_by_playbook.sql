-- A schedule's overlap policy (skip, queue, replace) asks for the
-- unfinished top-level runs of its playbook on every replica
-- (Coordinator.Unfinished): an index of those runs by playbook, which
-- stays as small as the runs in flight however long the history.
CREATE INDEX runbook_runs_unfinished_playbook ON runbook_runs (playbook, created_ns, id)
    WHERE status IN ('pending', 'running', 'waiting', 'suspended') AND parent_id = '';
