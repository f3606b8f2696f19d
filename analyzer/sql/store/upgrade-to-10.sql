-- Store format 9 -> 10: the machine of each file, call and incident (`ingest --machine`).
-- The files and calls stored before are this machine's (the variable lf_machine, set when the
-- store is opened: a store is upgraded where it was written); the kept incidents are
-- attributed afterwards by attribute.sql. No parameters. Columns are added last, as
-- schema.sql declares them. Every kept result is computed again.
ALTER TABLE sources ADD COLUMN IF NOT EXISTS machine VARCHAR DEFAULT getvariable('lf_machine');
ALTER TABLE calls ADD COLUMN IF NOT EXISTS machine VARCHAR DEFAULT getvariable('lf_machine');
ALTER TABLE incidents ADD COLUMN IF NOT EXISTS machine VARCHAR;
UPDATE sources SET machine = getvariable('lf_machine') WHERE machine IS NULL;
UPDATE calls SET machine = getvariable('lf_machine') WHERE machine IS NULL;
DELETE FROM cache;
