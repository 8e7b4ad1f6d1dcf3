"""The read side: select records from an archive or a raw log directory.

Public API (triage and report use these)::

    from ranklog.query.sources import open_source
    from ranklog.query.filters import QuerySpec
    from ranklog.query import engine

    source = open_source(archive="/srv/ranklog")          # or archive="https://…", token_file=…; or log_dir="./logs"
    spec = QuerySpec(start_ns=…, levels=("ERROR", "CRITICAL"), ranks=(0, 1))
    for batch in engine.scan(source, spec, columns=["ts", "rank", "msg"]):   # streams pa.RecordBatch
        ...
    table = engine.read(source, spec)                      # everything as one pa.Table
    n = engine.count(source, spec)

Modules: ``filters`` (QuerySpec, flag parsing), ``sources`` (where data lives), ``engine`` (pruning,
filtering, ordering, dedup), ``ray_engine`` (the per-file scan as Ray tasks, ``--engine ray``), ``trace_index``, ``outputs`` (table/CSV/JSON/NDJSON/Parquet), ``remote``
(HTTP client of the archive's ``/v1/query``), ``trace``, ``stats``, ``integrity``.
"""
