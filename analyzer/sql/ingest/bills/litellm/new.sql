-- The requests of a spend log that are not stored yet (lf_ll_new), from its typed rows
-- (lf_ll_rows, an Arrow table of every good row, in file order by line): the first row of
-- each request in the file (a later one is a duplicate), unless a stored call of this format
-- has it (a duplicate too). Parameter: $fmt.
CREATE OR REPLACE TEMP TABLE lf_ll_new AS
SELECT * FROM lf_ll_rows r
WHERE NOT EXISTS (SELECT 1 FROM calls c
                  WHERE c.format = $fmt AND c.native_id = r.native_id)
QUALIFY row_number() OVER (PARTITION BY r.native_id ORDER BY r.line) = 1
ORDER BY r.line;
