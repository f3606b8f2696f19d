-- Store format 10 -> 11: where the next read of each growing log can start (resume_points,
-- created by schema.sql after this step). No file read before has one: its next read, if it
-- grew, reads it whole, as before. No parameters. Every kept result is computed again.
DELETE FROM cache;
