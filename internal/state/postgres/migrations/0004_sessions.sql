-- The web UI's sessions, by key: the SHA-256 of the session ID in the
-- browser's cookie (never the ID itself). record is the state.Session.
CREATE TABLE runbook_sessions (
    key     text COLLATE "C" PRIMARY KEY,
    expires timestamptz NOT NULL,
    record  json NOT NULL
);
CREATE INDEX runbook_sessions_expires ON runbook_sessions (expires);
