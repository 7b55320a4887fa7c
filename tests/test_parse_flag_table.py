"""``--flag NAME=VALUE``: every spelling of true and false, for the boolean flags and the two string-valued ones
(whose value is kept as written, so ``Flags`` can name the bad value), and each malformed form. Written to kill
the mutants of ``parse_flag`` that survived the mutation run (benchmarks/mutation.py)."""
from __future__ import annotations

import pytest

from simcache.errors import ConfigError
from simcache.versions import FLAG_NAMES, parse_flag

TRUE, FALSE = ("true", "1", "yes", "on", "TRUE", "Yes", "On"), ("false", "0", "no", "off", "FALSE", "No", "oFF")
STRINGS = ("host_leaf_predicate", "write_backup_parent_check")
BOOLS = [n for n in FLAG_NAMES if n not in STRINGS]


@pytest.mark.parametrize("name", BOOLS)
def test_boolean_flags_read_every_spelling_of_true_and_false(name):
    assert [parse_flag(f"{name}={w}") for w in TRUE] == [(name, True)] * len(TRUE)
    assert [parse_flag(f" {name} = {w} ") for w in FALSE] == [(name, False)] * len(FALSE)
    assert parse_flag(f"{name}=maybe") == (name, "maybe")  # Flags then names the bad value


@pytest.mark.parametrize("name", STRINGS)
def test_string_flags_keep_the_value_as_written(name):
    for word in TRUE + FALSE + ("no_children", "all", " none "):
        assert parse_flag(f"{name}={word}") == (name, word.strip())
    assert parse_flag(f"{name}=a=b") == (name, "a=b")  # the first '=' splits; Flags then names 'a=b'


@pytest.mark.parametrize("text", ["stale_guards", "=true", "nope=true", " =", "stale_guard=true"])
def test_malformed_flags_say_what_is_expected(text):
    with pytest.raises(ConfigError) as e:
        parse_flag(text)
    assert str(e.value) == (f"--flag expects NAME=VALUE with NAME one of {', '.join(FLAG_NAMES)}; got {text!r}")
