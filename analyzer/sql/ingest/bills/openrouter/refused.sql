-- The records the CSV reader refused (lf_or_rej) into rejects: one per record, whatever
-- number of faults it found in it, with the careful read's reason (lf_or_fix) for a line it
-- stood in for. Parameter: $sid (the source).
INSERT INTO rejects
SELECT $sid, line, string_agg(reason, '; ' ORDER BY reason), any_value(excerpt)
FROM (SELECT r.line,
             coalesce(any_value(f.reason),
                 CASE WHEN r.error_type ILIKE 'invalid%'
                           AND any_value(r.error_message) ILIKE '%unicode%'
                      THEN 'bytes that are not valid UTF-8 in this row (a damaged '
                           || 'file?)'
                      ELSE lower(replace(r.error_type, '_', ' ')) || ': '
                           || any_value(r.error_message) END) AS reason,
             coalesce(any_value(f.excerpt),
                      left(trim(any_value(r.csv_line), E'\r\n'), 300)) AS excerpt
      FROM lf_or_rej r
      LEFT JOIN lf_or_fix f ON f.marker = trim(r.csv_line, E'\r\n')
      GROUP BY r.line, r.error_type)
GROUP BY line;
