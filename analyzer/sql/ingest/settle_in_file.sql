-- A set of files' calls (lf_call_batch: every call a file's log wrote, in its order `pos`,
-- each with its source_id) settled within each file and against the replayed responses the
-- store holds, before they meet the store's calls (settle_calls.sql). Parameter: fmt.
-- lf_call_kept: the calls to store; lf_call_gone: the others (source_id, call_id, n_records).
-- The calls are views over lf_call_batch, not tables: a long file is settled in parts inside
-- its one transaction, and a temporary table dropped or replaced there keeps its rows until
-- the commit (a copy of every part); lf_call_gone is a table (it reads the store's calls,
-- which the insert changes), of the few replays left out.
--
-- The same call twice in one file (a conversation that saved a message twice): the first is
-- the call, the others' records are duplicates.
CREATE OR REPLACE TEMP VIEW lf_call_first AS
SELECT * EXCLUDE (nth) FROM (
    SELECT *, row_number() OVER (PARTITION BY source_id, native_id ORDER BY pos) AS nth
    FROM lf_call_batch)
WHERE nth = 1;

-- A replay (a call flagged replay, with a response id) is the same API response written
-- again when another call of the file has that response id - an original anywhere, or an
-- earlier replay - or when a stored call of the format has it, one of another native id than
-- the file's replays.
CREATE OR REPLACE TEMP TABLE lf_call_gone AS
SELECT r.source_id, r.native_id, r.n_records
FROM lf_call_first r
WHERE r.replay AND r.response_id <> ''
  AND (EXISTS (SELECT 1 FROM lf_call_first o
               WHERE o.source_id = r.source_id AND o.response_id = r.response_id
                 AND (NOT coalesce(o.replay, false) OR o.pos < r.pos))
       OR EXISTS (SELECT 1 FROM calls c
                  WHERE c.format = $fmt AND c.response_id = r.response_id
                    AND c.native_id IS NOT NULL
                    AND NOT EXISTS (SELECT 1 FROM lf_call_first x
                                    WHERE x.source_id = r.source_id AND x.replay
                                      AND x.response_id <> ''
                                      AND x.native_id = c.native_id)));

CREATE OR REPLACE TEMP VIEW lf_call_kept AS
SELECT f.* FROM lf_call_first f
WHERE NOT EXISTS (SELECT 1 FROM lf_call_gone g
                  WHERE g.source_id = f.source_id AND g.native_id IS NOT DISTINCT FROM f.native_id)
ORDER BY f.source_id, f.pos;
