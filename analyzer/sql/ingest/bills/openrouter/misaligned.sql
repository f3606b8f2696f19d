-- How many rows of lf_or_typed and lf_or_seq, read side by side, are not the same row (0:
-- both hold the typed rows in rowid order, as store.sql needs them).
SELECT count(*) FROM (SELECT rowid AS rid FROM lf_or_typed) t
POSITIONAL JOIN (SELECT rid AS seq_rid FROM lf_or_seq) s
WHERE t.rid IS DISTINCT FROM s.seq_rid;
