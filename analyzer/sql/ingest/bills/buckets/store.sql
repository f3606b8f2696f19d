-- A report's buckets (lf_bucket_batch, an Arrow table) into bill_buckets, each priced at
-- list prices (lf_price, an Arrow table of prices by model and day) when it names a known
-- model and tier, a count. A bucket already stored (same bucket_key and provider) is a
-- duplicate. Parameters: $sid (the source), $fmt, $provider. Slots: cost and web_search (a
-- bucket b's tokens and searches at the prices p, analyzer.model.pricing).
INSERT INTO bill_buckets BY NAME
SELECT b.* EXCLUDE (price_model, price_size, price_factor, estimate),
       $sid AS source_id, $fmt AS format, $provider AS provider,
       lf_model_key(b.model) AS model_key,
       b.estimate::DECIMAL(18, 10) AS cost_estimate_usd
FROM (SELECT b.*,
             CASE WHEN p.model IS NOT NULL
                  THEN ({{cost}} + {{web_search}}) * b.price_factor
             END AS estimate
      FROM lf_bucket_batch b
      LEFT JOIN lf_price p
        ON p.model = b.price_model AND p.provider = $provider
       AND p.day = b.bucket_start::DATE AND NOT p.fast
       AND b.price_size > p.above
       AND (p.upto IS NULL OR b.price_size <= p.upto)) b
WHERE NOT EXISTS (SELECT 1 FROM bill_buckets s
                  WHERE s.bucket_key = b.bucket_key
                    AND s.provider = $provider);
