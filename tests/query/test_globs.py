"""--host / --logger globs: any number of wildcards compile to RE2 that Arrow accepts and that agrees
with fnmatch; a backslash selects a literal name that contains glob characters."""

from __future__ import annotations

import fnmatch

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from hypothesis import given, settings
from hypothesis import strategies as st

from ranklog.query.filters import QuerySpec
from ranklog.query.globs import glob_to_re2, split_literal

HOSTS = ["node0", "node10", "node100", "node*1", "node[1]", "gpu-a-0", "x?y", "back\\slash", "", "nodé0", "a\nb"]


def _matches(pattern: str, names: list[str]) -> list[str]:
    mask = pc.match_substring_regex(pa.array(names, pa.string()), glob_to_re2(pattern))
    return [n for n, hit in zip(names, mask.to_pylist(), strict=True) if hit]


def _select(hosts: tuple[str, ...]) -> list[str]:
    table = pa.table({"host": pa.array(HOSTS, pa.string()), "format": pa.array(["text"] * len(HOSTS))})
    expr = QuerySpec(hosts=hosts).expression()
    return ds.dataset(table).to_table(filter=expr).column("host").to_pylist()


def test_two_and_more_stars_work_where_fnmatch_translate_breaks_re2():
    assert _select(("node*0*",)) == ["node0", "node10", "node100"]
    assert _select(("*o*d*0",)) == ["node0", "node10", "node100", "nodé0"]
    assert _select(("n?de[!0-4]*", "gpu-*-*")) == ["node*1", "node[1]", "gpu-a-0"]


def test_backslash_selects_a_literal_name_with_glob_characters():
    assert split_literal("node\\*1") == "node*1"
    assert _select(("node\\*1",)) == ["node*1"]
    assert _select(("node\\[1]",)) == ["node[1]"]
    assert _select(("x\\?y", "back\\\\slash")) == ["x?y", "back\\slash"]
    assert _select(("node*1*",)) == ["node10", "node100", "node*1", "node[1]"]  # unescaped: a glob


_GLOB_ALPHABET = st.sampled_from(list("ab-]![*?^.$(){}|+\\é\n "))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(pattern=st.text(_GLOB_ALPHABET, max_size=10), names=st.lists(st.text(_GLOB_ALPHABET, max_size=8), max_size=8))
def test_translation_agrees_with_fnmatch(pattern, names):
    """Without backslashes the syntax is fnmatch's: every pattern compiles and selects what fnmatchcase does."""
    pattern = pattern.replace("\\", "")
    assert _matches(pattern, names) == [n for n in names if fnmatch.fnmatchcase(n, pattern)]
