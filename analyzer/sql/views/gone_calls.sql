-- Per group of a usage view, its calls read from files no longer on disk (every live call
-- once). Slot: key, the group's key (as usage.sql's). Parameters: gone (the source ids of
-- those files), tz (when the key counts days in a zone).
SELECT coalesce({{key}}, '(no time)') AS k, count(*) AS n
FROM live_calls
WHERE list_contains($gone, source_id)
GROUP BY ALL;
