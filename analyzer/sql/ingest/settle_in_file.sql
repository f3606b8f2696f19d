-- A set of files' calls (lf_call_batch: every call a file's log wrote, in its order `pos`,
-- each with its source_id) settled within each file and against the replayed responses the
-- store holds, before they meet the store's calls (settle_calls.sql). Parameter: fmt.
-- The last statement: the calls to store, in their order (the sink registers them as
-- lf_call_kept, an Arrow table, which every later statement reads instead of settling them
-- again); lf_call_gone: the others (source_id, native_id, n_records).
-- The calls are not a temporary table: a long file is settled in parts inside its one
-- transaction, and a temporary table dropped or replaced there keeps its rows until the
-- commit (a copy of every part), an Arrow table the step lets go of does not; lf_call_gone is
-- a table (it reads the store's calls, which the insert changes), of the few replays left out.
--
-- The same call twice in one file (a conversation that saved a message twice): the first is
-- the call, the others' records are duplicates. (A file's places pos are its own, one a
-- call: the first of each native id is found on the narrow keys alone, not by numbering
-- every wide row.)
CREATE OR REPLACE TEMP VIEW lf_call_first AS
SELECT * FROM lf_call_batch b
SEMI JOIN (SELECT source_id, min(pos) AS pos FROM lf_call_batch
           GROUP BY source_id, native_id) f
       ON f.source_id = b.source_id AND f.pos = b.pos;

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

SELECT f.* FROM lf_call_first f
WHERE NOT EXISTS (SELECT 1 FROM lf_call_gone g
                  WHERE g.source_id = f.source_id AND g.native_id IS NOT DISTINCT FROM f.native_id)
ORDER BY f.source_id, f.pos;
