-- Which of the response ids ids a stored call of format fmt has, one whose native id is not
-- among natives (a replay is the same API response written again). Parameters: fmt, ids,
-- natives.
SELECT DISTINCT response_id FROM calls
WHERE format = $fmt AND response_id IN (SELECT unnest($ids))
  AND native_id NOT IN (SELECT unnest($natives))
ORDER BY response_id;
