-- The spend ledger (guards/spend.py, ledger_of): what the store's calls spent in the
-- recent days, 5-hour windows and months, by source file, priced as the usage views price
-- them (cost_usd, every live call once), in UTC as they count days by default. One row per
-- period and file: scope ('day', 'window', 'month'), the period's key (2026-11-29,
-- 2026-11-29T14:00 - the hour its window starts, 2026-11), the file's path, its dollars,
-- and the period's last call (of every file). Recent: the day of $now and the day before,
-- the last two windows, the month of $now and the month before. Windows as
-- views/blocks.sql finds them. Parameter $now (naive UTC). Slots: <starts> the windows'
-- first calls (window_starts.sql over live_calls).
WITH starts AS (
{{starts}}
), c AS (
    SELECT c.ts, coalesce(c.cost_usd, 0) AS usd, s.path
    FROM live_calls c JOIN sources s USING (source_id)
    WHERE c.ts IS NOT NULL
), w AS (
    SELECT c.*, date_trunc('hour', st.first_ts) AS window_start
    FROM c ASOF JOIN starts st ON c.ts >= st.first_ts
), recent AS (
    SELECT max(window_start) AS last_start,
           (SELECT max(window_start) FROM w w2
            WHERE w2.window_start < (SELECT max(window_start) FROM w)) AS before_start
    FROM w
), placed AS (
    SELECT 'day' AS scope, strftime(ts, '%Y-%m-%d') AS key, path, usd, ts FROM c
    WHERE ts >= date_trunc('day', $now::TIMESTAMP) - INTERVAL 1 DAY
    UNION ALL
    SELECT 'month', strftime(ts, '%Y-%m'), path, usd, ts FROM c
    WHERE ts >= date_trunc('month', $now::TIMESTAMP) - INTERVAL 1 MONTH
    UNION ALL
    SELECT 'window', strftime(window_start, '%Y-%m-%dT%H:00'), path, usd, ts
    FROM w, recent
    WHERE w.window_start >= coalesce(recent.before_start, recent.last_start)
)
SELECT scope, key, path, sum(usd) AS usd,
       max(max(ts)) OVER (PARTITION BY scope, key) AS last_ts
FROM placed
GROUP BY scope, key, path
ORDER BY scope, key, path;
