-- Keep a value in the store's meta table under a key, replacing what it held: $key, $value.
INSERT INTO meta VALUES ($key, $value)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;
