"""What the standard log shippers send, decoded into records: OTLP/HTTP logs (:mod:`.otlp`), Loki push
(:mod:`.loki_push`), JSON arrays and msgpack from Vector and Fluent Bit (:mod:`.generic`), behind one
dispatch (:mod:`.dispatch`) that also names the right endpoint for a body sent to the wrong one.
The field mapping is in docs/archive.md ("Standard shippers in"); keys and retries in :mod:`.batch`."""
