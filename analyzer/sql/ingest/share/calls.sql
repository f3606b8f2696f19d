-- The calls of a shared batch (lf_sh_calls: its calls.parquet as read) that the store does not
-- hold: the first of each call id in the batch (in the order its machine stored them), unless
-- a stored call has it; each stored under the batch's read ($sid) and kept under the machine
-- it was read on (the batch's, $machine, where it names none). The last statement's result is
-- the count stored.
INSERT INTO calls BY NAME
SELECT * REPLACE ($sid AS source_id, coalesce(c.machine, $machine) AS machine)
FROM lf_sh_calls c
WHERE c.call_id NOT IN (SELECT call_id FROM calls)
QUALIFY row_number() OVER (PARTITION BY c.call_id ORDER BY c.source_id, c.line NULLS LAST) = 1;
