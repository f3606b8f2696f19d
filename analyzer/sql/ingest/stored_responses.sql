-- The stored calls of format fmt that answer one of the response ids ids: (response_id,
-- native_id). A replay is the same API response written again: one whose response id a
-- stored call of another native id has is a duplicate. Parameters: fmt, ids.
SELECT response_id, native_id FROM calls
WHERE format = $fmt AND native_id IS NOT NULL AND response_id IN (SELECT unnest($ids))
ORDER BY response_id, native_id;
