-- A generation already stored is a duplicate: the rows of lf_or_new whose id a stored call
-- of this format has are taken out (the same generation has the same created_at, so only
-- the file's time range is compared). Parameters: $fmt, $lo and $hi (the file's first and
-- last time).
DELETE FROM lf_or_new n
WHERE EXISTS (SELECT 1 FROM calls c
              WHERE c.format = $fmt AND c.native_id = n.native_id
                AND c.ts BETWEEN $lo AND $hi);
