-- A replay's messages written in an earlier chunk of its file, taken out again.
-- Parameters: sid (the file's source), ids (the replays' call ids).
DELETE FROM messages WHERE source_id = $sid AND call_id IN (SELECT unnest($ids));
