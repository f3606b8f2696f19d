-- A generation id the file repeats loads once: the rows of lf_or_new that are not the one
-- kept (lf_or_dups.keep, the first) are taken out.
DELETE FROM lf_or_new n
WHERE EXISTS (SELECT 1 FROM lf_or_dups d
              WHERE d.generation_id = n.native_id AND d.keep <> n.rid);
