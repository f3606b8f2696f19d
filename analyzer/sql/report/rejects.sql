-- The first rejected records, in file and line order. Parameter: top (rows kept).
SELECT s.path, r.line, r.reason, r.excerpt
FROM rejects r JOIN sources s USING (source_id)
ORDER BY s.source_id, r.line
LIMIT $top;
