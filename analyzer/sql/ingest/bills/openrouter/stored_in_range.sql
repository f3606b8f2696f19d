-- Does the store hold a call of this format in the file's time range (1, else 0: then no row
-- can be a duplicate)? Parameters: $fmt, $lo and $hi (the file's first and last time).
SELECT count(*)
FROM (SELECT 1 FROM calls WHERE format = $fmt AND ts BETWEEN $lo AND $hi LIMIT 1);
