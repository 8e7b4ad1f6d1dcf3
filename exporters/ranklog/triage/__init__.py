"""Triage: which rank failed first, and why.

The pipeline, one module per step:

- :mod:`.gather`    two DuckDB scans over the source (archive Parquet, a parsed log directory, any
                    Arrow table): per-rank summary and the incidents worth reading;
- :mod:`.templates` collapse the same message from many ranks into one template and a rank set;
- :mod:`.evidence`  signatures, templates, clock offsets, NCCL sequence numbers, silent ranks, the
                    first-error timeline;
- :mod:`.verdict`   causal ordering that survives clock skew, and a confidence;
- :mod:`.present`    the terminal view (rich) and the JSON document;
- :mod:`.analyze`   one call from a source to a :class:`~.analyze.Triage` (CLI, report, demo).
"""
