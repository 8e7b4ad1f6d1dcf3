"""The central Parquet archive service (`ranklog archive`).

Data path, one module per job: app (HTTP routes) → auth (bearer tokens, each shared or bound to a
node identity and its hosts) → ingest (Arrow IPC / NDJSON bodies → record tables) → pipeline (host
check, dedup + WAL under one lock, group-commit fsync, ACK; background flush) → dedup (exactly-once
by (identity, source_id, offset)) → wal (durable log, replay) → writer (Parquet settings, hour
split, sort order) → journal (crash-safe file replacement) → compaction / retention (maintenance
thread) → storage (pyarrow filesystem, layout, disk probe).
config holds the dataclass; service wires it all and runs uvicorn.
"""
