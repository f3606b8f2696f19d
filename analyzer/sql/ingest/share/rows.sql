-- The rows of a shared batch's messages or runs (slot: table; the batch's are lf_sh_<table>)
-- that the store does not hold: a row equal, in every column but the file it came from
-- (slot: columns, the batch file's columns less source_id), to one stored (the same message
-- of the same session read on two machines, or shared twice) is a duplicate. Stored under the
-- batch's read ($sid); the last statement's result is the count stored.
INSERT INTO {{table}} BY NAME
SELECT $sid AS source_id, n.*
FROM (SELECT {{columns}} FROM lf_sh_{{table}}
      EXCEPT
      SELECT {{columns}} FROM {{table}}) n;
