"""Schemathesis hooks for fuzzing the archive (``SCHEMATHESIS_HOOKS=tests.helpers.reliability_schemathesis_hooks``).

Schemathesis cannot serialize the archive's two ingest media types by itself: NDJSON bodies are
the schema-generated record objects written one per line (plus a second copy of the line, so
multi-line bodies are exercised); Arrow IPC bodies are drawn from valid streams (a well-formed
record batch, one with an unknown column, an empty stream), the same streams truncated or with
flipped bytes, and raw random bytes — the parser must answer 400, never 5xx.
"""

from __future__ import annotations

import json

import schemathesis
from hypothesis import strategies as st

ARROW = "application/vnd.apache.arrow.stream"


def _arrow_samples() -> list[bytes]:
    import io

    import pyarrow as pa

    from ranklog.record import arrow_schema

    def stream(table: pa.Table) -> bytes:
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue()

    good = pa.table({"ts": pa.array([0], pa.timestamp("ns", tz="UTC")), "level": ["INFO"], "msg": ["fuzz"],
                     "host": ["h"], "ip": [""], "source": ["fuzz"], "source_id": ["fuzz"], "offset": [0],
                     "format": ["text"]})
    good = good.cast(pa.schema([arrow_schema().field(name) for name in good.column_names]))
    unknown = pa.table({"no_such_column": [1, 2, 3]})
    return [stream(good), stream(unknown), stream(arrow_schema().empty_table())]


_SAMPLES = _arrow_samples()


def _damaged(sample: bytes, cut: int, flip: int) -> bytes:
    data = bytearray(sample[: max(1, cut % (len(sample) + 1))])
    if data:
        data[flip % len(data)] ^= 0xFF
    return bytes(data)


_ARROW_BODIES = st.one_of(
    st.sampled_from(_SAMPLES),
    st.builds(_damaged, st.sampled_from(_SAMPLES), st.integers(0, 4096), st.integers(0, 4096)),
    st.binary(max_size=2048),
)
schemathesis.openapi.media_type(ARROW, _ARROW_BODIES)


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value) -> bytes:
    line = json.dumps(value, default=str).encode()
    return line + b"\n" + line + b"\n"
