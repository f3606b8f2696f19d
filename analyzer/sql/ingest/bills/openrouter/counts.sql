-- What the typed rows are (lf_or_typed): how many, how many cannot load, how many are the
-- header written again.
SELECT count(*), count(reject_reason), count(*) FILTER (WHERE is_header)
FROM lf_or_typed;
