-- An assignment's agent says it has it: it listed it running in a poll,
-- or sent its result. One delivered and never acked was in a poll's answer
-- that did not reach its agent (the replica holding the poll was killed,
-- the connection broke): the next poll offers it again.
ALTER TABLE runbook_agent_assignments ADD COLUMN acked boolean NOT NULL DEFAULT false;
