-- The usage-first reads $ids (analyzer.load.usage_first) let go of, before their files are read
-- whole: every row they wrote, and the links to their calls (a call read again is linked again).
-- Parameter: ids (source ids).
CREATE OR REPLACE TEMP TABLE lf_dropped AS SELECT unnest($ids::INTEGER[]) AS source_id;

UPDATE calls SET superseded_by = NULL
WHERE superseded_by IN (SELECT call_id FROM calls
                        WHERE source_id IN (SELECT source_id FROM lf_dropped));

DELETE FROM calls WHERE source_id IN (SELECT source_id FROM lf_dropped);
DELETE FROM messages WHERE source_id IN (SELECT source_id FROM lf_dropped);
DELETE FROM runs WHERE source_id IN (SELECT source_id FROM lf_dropped);
DELETE FROM rejects WHERE source_id IN (SELECT source_id FROM lf_dropped);
DELETE FROM resume_points WHERE source_id IN (SELECT source_id FROM lf_dropped);
DELETE FROM sources WHERE source_id IN (SELECT source_id FROM lf_dropped);
DROP TABLE lf_dropped;
