-- Store format 11 -> 12: what each tool call, tool result and refusal means (messages.
-- meaning_key, ingest/meaning.py). Messages read before have none: the detectors compare them
-- as they were read then (their exact hashes), and a tool output that says it failed but was
-- flagged as no error stays as it was flagged; a file read again into a new store gets both.
-- No parameters. The column is added last, as schema.sql declares it. Every kept result is
-- computed again.
ALTER TABLE messages ADD COLUMN IF NOT EXISTS meaning_key VARCHAR;
DELETE FROM cache;
