"""errors.py compared whole: ``shown`` at its limits (the default, a given one, exactly at and one past it, a count
with thousands separators) and the two voices' family tree, which callers catch by."""
from __future__ import annotations

from simcache.errors import (
    CacheAssertion,
    ConfigError,
    FileError,
    ScenarioError,
    ScheduleError,
    SimcacheError,
    UnreadableFile,
    shown,
)


def test_shown_is_the_repr_cut_at_its_limit():
    assert shown("abc") == "'abc'"
    assert shown(None) == "None" and shown([1, "a"]) == "[1, 'a']"
    assert shown("a" * 58) == "'" + "a" * 58 + "'"  # 60 characters: whole
    assert shown("a" * 59) == "'" + "a" * 59 + "... (61 characters)"
    assert shown("b" * 8, 10) == "'bbbbbbbb'"
    assert shown("b" * 9, 10) == "'bbbbbbbbb... (11 characters)"
    assert shown("c" * 1_234, 5) == "'cccc... (1,236 characters)"
    assert shown(12345, 3) == "123... (5 characters)"


def test_the_two_voices_family_tree():
    assert issubclass(CacheAssertion, AssertionError) and not issubclass(CacheAssertion, SimcacheError)
    for cls in (ConfigError, ScenarioError, ScheduleError, FileError):
        assert cls.__bases__ == (SimcacheError,)
    assert UnreadableFile.__bases__ == (FileError, ScenarioError)
    assert SimcacheError.__bases__ == (Exception,)
