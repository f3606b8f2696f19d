-- The rejected records (of the files whose path contains parameter f, with the slot), in
-- file and line order. Slot: only, the condition on the path (or nothing).
SELECT s.path, r.line, r.reason, r.excerpt
FROM rejects r JOIN sources s USING (source_id) {{only}}
ORDER BY s.source_id, r.line NULLS LAST;
