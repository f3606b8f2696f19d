-- One cache entry kept (replacing the one of the same name). Parameters (positional): the
-- cache name, its key, its payload.
INSERT INTO cache VALUES (?, ?, ?) ON CONFLICT (name)
DO UPDATE SET key = excluded.key, payload = excluded.payload;
