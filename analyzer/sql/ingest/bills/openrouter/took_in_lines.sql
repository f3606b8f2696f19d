-- Did the CSV reader lose records? The records it refused that took in the lines after them
-- (their text spans lines), an unquoted value (a stray quote, or a record over the line
-- limit), a line over the limit: a count, 0 when none.
SELECT count(*) FROM lf_or_rej
WHERE error_type IN ('UNQUOTED VALUE', 'LINE SIZE OVER MAXIMUM')
   OR strpos(csv_line, chr(10)) > 0;
