-- The generation ids that more than one good row of the file has (lf_or_dups), and the row
-- that is kept of each (keep: the first, by rowid). (Hashes of the ids group fast: only the
-- ids whose hash repeats are grouped by their text.)
CREATE TEMP TABLE lf_or_dups AS
SELECT generation_id, min(rid) AS keep
FROM (SELECT rowid AS rid, generation_id FROM lf_or_typed
      WHERE reject_reason IS NULL AND NOT is_header AND hash(generation_id) IN (
        SELECT hash(generation_id) FROM lf_or_typed
        WHERE reject_reason IS NULL AND NOT is_header GROUP BY 1 HAVING count(*) > 1))
GROUP BY generation_id HAVING count(*) > 1;
