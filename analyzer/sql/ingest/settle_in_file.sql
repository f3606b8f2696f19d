-- A set of files' calls settled within each file and against the replayed responses the
-- store holds, before they meet the store's calls (settle_calls.sql). Parameter: fmt.
-- lf_call_batch: the keys of every call a file's log wrote (sink.BATCH_KEYS), in its order
-- `pos`, each with its source_id and its row `lf_row` in the batch.
-- The last statement: the rows (lf_row) of the calls to store, in their order (the sink takes
-- them from the batch as an Arrow table, lf_call_kept, which every later statement reads
-- instead of settling them again; only the narrow keys are read here, never the wide rows);
-- lf_call_gone: the others (source_id, native_id, n_records).
-- The calls are not a temporary table: a long file is settled in parts inside its one
-- transaction, and a temporary table dropped or replaced there keeps its rows until the
-- commit (a copy of every part), an Arrow table the step lets go of does not; lf_call_first
-- and lf_call_gone are tables of narrow keys.
--
-- The same call twice in one file (a conversation that saved a message twice): the first is
-- the call, the others' records are duplicates. (A file's places pos are its own, one a
-- call: the first of each native id is found on the narrow keys alone, not by numbering
-- every wide row; and kept in a narrow table, read by each statement below, not worked out
-- again by each.)
CREATE OR REPLACE TEMP TABLE lf_call_first AS
SELECT source_id, pos, lf_row, native_id, replay, response_id, n_records
FROM lf_call_batch
QUALIFY pos = min(pos) OVER (PARTITION BY source_id, native_id);

-- A replay (a call flagged replay, with a response id) is the same API response written
-- again when another call of the file has that response id - an original anywhere, or an
-- earlier replay - or when a stored call of the format has it, one of another native id than
-- the file's replays. (Each of the two is found for the few replays alone.)
CREATE OR REPLACE TEMP TABLE lf_call_gone AS
WITH replays AS (SELECT * FROM lf_call_first WHERE replay AND response_id <> ''),
by_file AS (
    SELECT r.source_id, r.pos FROM replays r
    SEMI JOIN lf_call_first o
           ON o.source_id = r.source_id AND o.response_id = r.response_id
          AND (NOT coalesce(o.replay, false) OR o.pos < r.pos)),
by_store AS (
    SELECT r.source_id, r.pos FROM replays r
    SEMI JOIN (SELECT c.response_id, c.native_id FROM calls c
               WHERE c.format = $fmt AND c.native_id IS NOT NULL
                 AND c.response_id IN (SELECT response_id FROM replays)) c
           ON c.response_id = r.response_id
          AND NOT EXISTS (SELECT 1 FROM replays x
                          WHERE x.source_id = r.source_id AND x.native_id = c.native_id))
SELECT r.source_id, r.native_id, r.n_records
FROM replays r
SEMI JOIN (SELECT * FROM by_file UNION SELECT * FROM by_store) g
       ON g.source_id = r.source_id AND g.pos = r.pos;

SELECT lf_row FROM lf_call_first f
WHERE NOT EXISTS (SELECT 1 FROM lf_call_gone g
                  WHERE g.source_id = f.source_id AND g.native_id IS NOT DISTINCT FROM f.native_id)
ORDER BY f.source_id, f.pos;
