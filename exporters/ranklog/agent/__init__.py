"""The node agent (`ranklog agent`): find every training log on the node, ship it, export metrics.

Data path, one module per step:

- :mod:`.agent_config`, :mod:`.presets` — what to read (globs + formats; ranklog/ray/torchrun/verl presets);
- :mod:`.discover`, :mod:`.inotify` — discovery in its own thread (on directory change notices, and a
  250 ms poll as the safety net), opening new files at once;
- :mod:`ranklog.file_identity`, :mod:`.tracked_file`, :mod:`.file_tracker` — file identity (dev+inode+head checksum), rotation,
  truncation, deletion; reading and parsing (``ranklog.parse``) into Arrow record batches;
- :mod:`.log_metrics`, :mod:`.metrics_thread` — Prometheus metrics from each parsed batch (vectorized, on a
  thread of their own);
- :mod:`.ship`, :mod:`.endpoints`, :mod:`.backpressure` — batching, POST /v1/ingest, fail-over,
  backoff, bounded memory;
- :mod:`.chunk`, :mod:`.acks`, :mod:`.checkpoint` — the unit of work (a parsed byte range), checkpoints that advance only over acknowledged bytes;
- :mod:`.runner` — the main loop tying them together.
"""
