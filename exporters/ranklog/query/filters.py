"""What to select: the filter model, :class:`QuerySpec`, and its validation for remote queries.

The same filter in its other forms, one module per job: :mod:`.filter_flags` (the CLI flags and the
parsing of their values), :mod:`.filter_arrow` (the compiler to Arrow expressions),
:mod:`.filter_attrs` (Python matching of ``--attr`` on the JSON ``attrs``).

Decisions where the spec is silent (also in ``ranklog query --help``):

- Times without a zone are UTC (or ``--tz``'s zone). ``start`` is inclusive and ``end`` exclusive (a half-open range, so
  ``--end 2025-10-02`` means "up to the end of October 1st" and adjacent ranges never overlap).
  Accepted spellings: RFC 3339 / ISO 8601, epoch seconds, ``now``, relative ages (``2h``, ``1h30m``,
  ``30m ago``, ``-2h``) and calendar words (``today``, ``yesterday 14:00``): :mod:`.times`.
- ``--level X`` is a minimum (UNKNOWN is never included); ``--levels A,B`` is an exact set.
- ``--contains`` and ``--regex`` search the message *and* the exception text (a traceback belongs to
  the record it follows). ``--regex`` uses RE2 syntax (Arrow's and DuckDB's engine: no
  backreferences or look-around); a bad pattern fails before anything is read.
- ``--host``, ``--logger`` and ``--job`` values containing ``*``, ``?`` or ``[`` are shell-style globs, with any
  number of wildcards; a backslash makes the next character literal (``--host 'odd\\*name'``).
- ``--attr k=v`` matches when the JSON ``attrs`` has key ``k`` (a dotted path reaches into nested
  objects) whose value, as text, equals ``v``; ``--attr k`` only requires the key.
- Several values of one filter are OR-ed; different filters are AND-ed.
- ``ranklog triage --annotate``'s verdict records (``format="triage"``) are left out unless the spec
  asks for them: ``annotations`` true, or a ``format`` label matcher (Grafana's annotation query
  ``{format="triage"}``). They describe the logs; counted as logs they would change the next answer.
- ``label_matchers`` and ``line_filters`` carry a LogQL selection (the archive's Loki API) to the same
  engine: ``(label, op, value)`` with Loki's ``= != =~ !~`` over job, host, rank, local_rank, role,
  level, format, trace_id (a missing value is "") and the labels Loki derives from two of them,
  ``service_name`` (the job) and ``detected_level``, at most ``MAX_LABEL_MATCHERS`` of them; and
  ``(op, pattern)`` with ``|= != |~ !~`` over the message and exception text, all AND-ed (see
  :func:`.filter_arrow.matcher_expression`).
"""


from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..record import FIELDS, LEVELS
from .filter_arrow import DERIVED_COLUMNS, FILTER_COLUMNS, build_expression, check_matchers, check_regex
from .filter_attrs import filter_batch

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds

SORTABLE = frozenset(FIELDS) - {"attrs"}



@dataclass(frozen=True)
class QuerySpec:
    """A selection of records: every field left at its default selects everything.

    Serialisable (:meth:`to_dict` / :meth:`from_dict`) so a remote archive runs the same query.
    ``order`` lists sort keys (``ts``, ``-ts`` for descending, ``host``…); empty keeps storage order
    (cheapest). ``limit`` applies after sorting.
    """

    start_ns: int | None = None
    end_ns: int | None = None
    levels: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    ranks: tuple[int, ...] = ()
    jobs: tuple[str, ...] = ()
    trace_ids: tuple[str, ...] = ()
    loggers: tuple[str, ...] = ()
    step_min: int | None = None
    step_max: int | None = None
    contains: str | None = None
    regex: str | None = None
    ignore_case: bool = False
    attrs: tuple[str, ...] = ()
    limit: int | None = None
    order: tuple[str, ...] = ("ts",)
    label_matchers: tuple[tuple[str, str, str], ...] = ()
    line_filters: tuple[tuple[str, str], ...] = ()
    annotations: bool = False  # also triage's verdict records (see the module docstring)

    def __post_init__(self) -> None:
        if self.start_ns is not None and self.end_ns is not None and self.end_ns <= self.start_ns:
            raise UserError("the time range is empty: end must be after start")
        if self.step_min is not None and self.step_max is not None and self.step_max < self.step_min:
            raise UserError("--step-max is below --step-min")
        if self.limit is not None and self.limit < 0:
            raise UserError("--limit must be >= 0")
        for level in self.levels:
            if level not in LEVELS:
                raise UserError(f"unknown level {level!r} (one of {', '.join(LEVELS)})")
        for key in self.order:
            if key.lstrip("-") not in SORTABLE:
                raise UserError(f"cannot sort by {key.lstrip('-')!r} (one of {', '.join(sorted(SORTABLE))})")
        if self.regex is not None:
            check_regex(self.regex)
        check_matchers(self.label_matchers, self.line_filters)

    # -- serialisation (remote queries) ------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {k: ([list(i) if isinstance(i, tuple) else i for i in v] if isinstance(v, tuple) else v)
                for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Any) -> QuerySpec:
        """A spec from untrusted JSON (a remote query): every key and value type is checked."""
        if not isinstance(data, dict):
            raise UserError("the query spec must be a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(key) for key in set(data) - known)
        if unknown:
            raise UserError(f"unknown query key(s): {', '.join(unknown)}")
        return cls(**{name: _checked(name, value) for name, value in data.items()})

    # -- properties the engine uses ----------------------------------------------------------------
    @property
    def sorted_by_time(self) -> bool:
        """True when the order is by time alone (streamable partition by partition)."""
        return self.order in (("ts",), ("-ts",))

    @property
    def descending(self) -> bool:
        return bool(self.order) and self.order[0].startswith("-")

    def expression(self) -> ds.Expression | None:
        """The filter as a pyarrow dataset expression (pushed down to Parquet statistics)."""
        return build_expression(self)

    def filter_columns(self) -> list[str]:
        """The columns :meth:`expression` reads (kept next to :func:`build_expression`)."""
        used = [name for field, names in FILTER_COLUMNS.items() if getattr(self, field) not in (None, ())
                for name in names]
        used += [DERIVED_COLUMNS.get(name, name) for name, _, _ in self.label_matchers]
        return list(dict.fromkeys(used))

    def python_filter(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Apply the parts an expression cannot express (JSON ``attrs``) to a filtered batch."""
        if not self.attrs or batch.num_rows == 0:
            return batch
        return filter_batch(batch, self.attrs)


# -- validation of remote specs ----------------------------------------------------------------------
_INT_RANGES = {"start_ns": 63, "end_ns": 63, "step_min": 63, "step_max": 63, "limit": 63}
_INT_LISTS = {"pids": 31, "ranks": 31}
_STR_LISTS = ("levels", "hosts", "ips", "jobs", "trace_ids", "loggers", "attrs", "order")
_STRINGS = ("contains", "regex")
_STR_TUPLES = {"label_matchers": 3, "line_filters": 2}


def _is_int(value: Any, bits: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(1 << bits) <= value < (1 << bits)


def _checked(name: str, value: Any) -> Any:
    """`value` for field `name` if it has the right JSON type and range; UserError otherwise."""
    if name in _INT_RANGES:
        if value is None or _is_int(value, _INT_RANGES[name]):
            return value
        raise UserError(f"{name}: expected an integer (or null)")
    if name in _INT_LISTS:
        if isinstance(value, list) and all(_is_int(v, _INT_LISTS[name]) for v in value):
            return tuple(value)
        raise UserError(f"{name}: expected a list of integers")
    if name in _STR_LISTS:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise UserError(f"{name}: expected a list of strings")
    if name in _STR_TUPLES:
        size = _STR_TUPLES[name]
        if isinstance(value, list) and all(isinstance(item, list) and len(item) == size
                                           and all(isinstance(part, str) for part in item) for item in value):
            return tuple(tuple(item) for item in value)
        raise UserError(f"{name}: expected a list of [{', '.join(['string'] * size)}] lists")
    if name in _STRINGS:
        if value is None or isinstance(value, str):
            return value
        raise UserError(f"{name}: expected a string (or null)")
    if not isinstance(value, bool):
        raise UserError(f"{name}: expected true or false")
    return value
