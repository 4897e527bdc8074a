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
