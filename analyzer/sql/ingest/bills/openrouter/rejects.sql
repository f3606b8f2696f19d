-- The typed rows that cannot load (lf_or_typed.reject_reason) into rejects, at their lines.
-- Parameters: $sid (the source), $base (the first rowid of lf_or_typed) when the line is
-- counted from it. Slots: line (the row's line: l.line, or counted from its rowid rid) and
-- line_join (the join that gives l.line, or nothing).
INSERT INTO rejects
SELECT $sid, {{line}}, t.reject_reason, t.excerpt
FROM (SELECT rowid AS rid, * FROM lf_or_typed WHERE reject_reason IS NOT NULL) t
{{line_join}};
