-- A partitioned table's rows per UTC day ('unknown': no time), with a fingerprint of each
-- day's rows (what an export compares to write only the days that changed).
-- Slot: table, the table exported.
SELECT coalesce(strftime(t.ts, '%Y-%m-%d'), 'unknown') AS day, count(*), bit_xor(hash(t))
FROM {{table}} t
GROUP BY day;
