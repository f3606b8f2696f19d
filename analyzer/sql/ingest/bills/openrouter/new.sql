-- The rows that load, narrow (lf_or_new: where each is, its stream, time and id): the good
-- rows of lf_or_typed that are not a repeated header (a repeated id and a call already
-- stored are taken out afterwards, by drop_repeats.sql and drop_stored.sql). The stream is
-- api key, app, user and model, as store.sql makes it. Parameter: $base (the first rowid of
-- lf_or_typed) when the line is counted from it. Slots: line and line_join, as in
-- rejects.sql.
CREATE TEMP TABLE lf_or_new AS
SELECT t.rid, {{line}} AS line,
       coalesce(t.api_key, '') || '|' || coalesce(t.app, '') || '|'
       || coalesce(t.user_id, '') || '|' || t.model AS stream_key,
       t.ts, t.generation_id AS native_id
FROM (SELECT rowid AS rid, reject_reason, is_header, generation_id, ts, api_key, app,
             user_id, model FROM lf_or_typed) t
{{line_join}}
WHERE t.reject_reason IS NULL AND NOT t.is_header;
