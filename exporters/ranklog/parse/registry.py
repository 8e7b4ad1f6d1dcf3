"""Format name → parser, found by walking :mod:`ranklog.parse.formats`.

A format joins by being written: a module in ``parse/formats/`` that defines ``PARSERS``, a dict of
the format names it reads to their parser functions (see :class:`~.contract.Parser`), and, where
reads of several files can be parsed in one pass, ``PARSERS_MANY`` (see :func:`ranklog.parse.parse_many`).
Nothing else lists formats. Modules are imported on the first lookup, so ``import ranklog.parse`` stays cheap
(no pyarrow); a name claimed twice is an error at that lookup, not a silent override.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from . import formats
from .contract import Parser


@lru_cache(maxsize=2)
def parsers(table: str = "PARSERS") -> dict[str, Parser]:
    """Every format's parser, by format name (modules in name order, names in each module's order);
    with `table` ``PARSERS_MANY``, the formats' parsers of several reads at once."""
    found: dict[str, Parser] = {}
    owner: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(formats.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{formats.__name__}.{info.name}")
        for name, parser in getattr(module, table, {}).items():
            if name in found:
                raise RuntimeError(f"format {name!r} is defined by both {owner[name]} and {module.__name__}")
            found[name], owner[name] = parser, module.__name__
    return found


def parser_for(name: str) -> Parser:
    """The parser of format `name`; ValueError naming the known formats when there is none."""
    try:
        return parsers()[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; known: {', '.join(parsers())}") from None
