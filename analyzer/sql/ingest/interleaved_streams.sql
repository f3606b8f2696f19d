-- The streams of relation rows whose new rows do not all come after the stored calls of
-- format fmt. A fragment (a SELECT) put into a statement. Parameters: fmt. Slots: rows.
SELECT r.stream_key FROM {{rows}} r
GROUP BY r.stream_key
HAVING min(r.ts) <= (SELECT max(c.ts) FROM calls c
                     WHERE c.format = $fmt AND c.stream_key = r.stream_key)
