-- Every typed row, in rowid order, with its place in its stream (lf_or_seq; NULL for a row
-- that does not load), so that store.sql reads the two side by side (POSITIONAL JOIN)
-- instead of joining. The stream key and session id are not carried: the store rebuilds
-- them from the typed row. Parameters: $fmt, $gap (seconds of silence that start a
-- session). Slot: numbered (the numbering of lf_or_rows, analyzer.formats.bills.sessions).
CREATE TEMP TABLE lf_or_seq AS
SELECT r.rid, s.line, s.seq, s.session_start, s.session_given
FROM (SELECT rowid AS rid FROM lf_or_typed) r
LEFT JOIN ({{numbered}}) s USING (rid)
ORDER BY r.rid;
