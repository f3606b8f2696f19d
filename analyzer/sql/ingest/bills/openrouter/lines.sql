-- Where each typed row was in the file when the reader refused records (lf_or_rej): the
-- refused records' lines (header = 1) are skipped in the numbering of the good ones.
-- lf_or_thr: from typed row t (0 = the first) on, cnt refused records came before it;
-- lf_or_line: each typed row (rid) and its line. Parameter: $base (the first rowid of
-- lf_or_typed: rows of a table made inside a transaction are numbered from an offset).
CREATE TEMP TABLE lf_or_thr AS
SELECT t, max(cnt) AS cnt FROM (
    SELECT line - 2 - (row_number() OVER (ORDER BY line) - 1) AS t,
           row_number() OVER (ORDER BY line) AS cnt
    FROM (SELECT DISTINCT line FROM lf_or_rej)) GROUP BY t;
CREATE TEMP TABLE lf_or_line AS
SELECT r.rid, r.rid - $base + 2 + coalesce(thr.cnt, 0) AS line
FROM (SELECT rowid AS rid FROM lf_or_typed) r
ASOF LEFT JOIN lf_or_thr thr ON r.rid - $base >= thr.t;
