"""The ingest machinery a format is written with: what it is handed (``base``), how it reads
bytes and values (``reading``, ``jsonl``, ``values``, ``usage``), and how it hands over what it
read (``lowering``, ``rows``, ``content``, ``runs``), written to the store by ``sink``.
"""
