-- The requests of a spend log that are not stored yet (lf_ll_new), from its typed rows
-- (lf_ll_rows, an Arrow table: the first row of each request in the file): a request a
-- stored call of this format has is a duplicate. Parameter: $fmt.
CREATE OR REPLACE TEMP TABLE lf_ll_new AS
SELECT * FROM lf_ll_rows r
WHERE NOT EXISTS (SELECT 1 FROM calls c
                  WHERE c.format = $fmt AND c.native_id = r.native_id);
