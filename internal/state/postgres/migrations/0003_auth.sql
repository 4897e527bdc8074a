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
