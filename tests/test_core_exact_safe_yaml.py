"""safe_yaml.py compared whole: what plain data a scenario file's text reads as, and every refusal's exact sentence
(duplicate keys, tags, aliases past the size limits or into themselves, control characters, numbers too long,
nesting too deep, bad syntax), at the exact boundaries."""
from __future__ import annotations

import datetime

import pytest

from simcache import safe_yaml
from simcache.errors import ScenarioError
from simcache.safe_yaml import MAX_CHARS, MAX_NODES, _cut, load_json, load_yaml

TAG = "; scenario files hold plain data only (text, numbers, lists, mappings), so remove the tag"


def yaml_refused(text: str, name: str = "s.yaml") -> str:
    with pytest.raises(ScenarioError) as e:
        load_yaml(text, name)
    assert e.value.__cause__ is None and (e.value.__context__ is None or e.value.__suppress_context__)
    return str(e.value)


def json_refused(text: str, name: str = "s.json") -> str:
    with pytest.raises(ScenarioError) as e:
        load_json(text, name)
    assert e.value.__cause__ is None and (e.value.__context__ is None or e.value.__suppress_context__)
    return str(e.value)


def test_the_limits():
    assert (MAX_NODES, MAX_CHARS) == (1_000_000, 20_000_000)


def test_every_plain_kind_of_value_reads_as_plain_data():
    text = ("s: text\ni: 12\nf: 1.5\nb: true\nn: null\nl: [1, two]\nm: {k: v}\nd: 2001-12-14\n"
            "t: 2001-12-14 21:59:43\nbase: &base {x: 1, y: 2}\nmerged:\n  <<: *base\n  y: 3\n")
    assert load_yaml(text, "s.yaml") == {
        "s": "text", "i": 12, "f": 1.5, "b": True, "n": None, "l": [1, "two"], "m": {"k": "v"},
        "d": datetime.date(2001, 12, 14), "t": datetime.datetime(2001, 12, 14, 21, 59, 43),
        "base": {"x": 1, "y": 2}, "merged": {"x": 1, "y": 3}}
    assert load_yaml("[a, b]", "s.yaml") == ["a", "b"]
    assert load_yaml("plain", "s.yaml") == "plain"


def test_an_empty_file_or_only_comments_is_none():
    assert load_yaml("", "s.yaml") is None
    assert load_yaml("# nothing here\n\n", "s.yaml") is None


def test_a_duplicate_key_names_both_lines_and_keeps_the_file_name_in_front():
    assert yaml_refused("a: 1\nb: 2\na: 3\n") == (
        "s.yaml: duplicate key 'a' at line 3 (first at line 1); give each key once")
    assert yaml_refused("top:\n  x: 1\n\n  x: 2\n") == (
        "s.yaml: duplicate key 'x' at line 4 (first at line 2); give each key once")
    # 1 and 1.0 are one key once read
    assert yaml_refused("1: a\n1.0: b\n") == "s.yaml: duplicate key 1.0 at line 2 (first at line 1); give each key once"
    assert yaml_refused("k" * 80 + ": 1\n" + "k" * 80 + ": 2\n") == (
        f"s.yaml: duplicate key '{'k' * 59}... (82 characters) at line 2 (first at line 1); give each key once")


def test_keys_after_a_merge_or_an_unhashable_key_are_still_checked():
    assert yaml_refused("b: &a {x: 1}\nc:\n  <<: *a\n  y: 1\n  y: 2\n") == (
        "s.yaml: duplicate key 'y' at line 5 (first at line 4); give each key once")
    assert yaml_refused("x: 1\nx: 2\n? [1, 2]\n: v\n") == (
        "s.yaml: duplicate key 'x' at line 2 (first at line 1); give each key once")
    # two merges are not a duplicate key (the constructor merges both)
    assert load_yaml("a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: *a\n  <<: *b\n", "s.yaml")["c"] == {"x": 1, "y": 2}
    # a complex key (a list or a mapping as a key) is valid YAML that plain data cannot hold: said as such
    complex_key = "(a YAML complex key, '? ...'); keys are plain text, so write the key as text"
    assert yaml_refused("? [1, 2]\n: v\n") == f"s.yaml: a list is used as a mapping key at line 1 {complex_key}"
    assert yaml_refused("a: 1\n? {b: 2}\n: v\n") == (
        f"s.yaml: a mapping is used as a mapping key at line 2 {complex_key}")
    assert yaml_refused("a: {[1]: 2}\n") == f"s.yaml: a list is used as a mapping key at line 1 {complex_key}"


def test_any_tag_but_plain_data_is_named_with_its_line():
    assert yaml_refused("a: 1\nb: !!python/object/apply:os.system [ls]\n") == (
        f"s.yaml uses the tag '!!python/object/apply:os.system' at line 2{TAG}")
    assert yaml_refused("a: !!binary aGVsbG8=") == f"s.yaml uses the tag '!!binary' at line 1{TAG}"
    assert yaml_refused("\n\na: !!set {x}") == f"s.yaml uses the tag '!!set' at line 3{TAG}"
    assert yaml_refused("%TAG ! tag:example.com,2000:\n---\na: !foo 1") == (
        f"s.yaml uses the tag 'tag:example.com,2000:foo' at line 3{TAG}")
    assert yaml_refused("!include other.yaml") == f"s.yaml uses the tag '!include' at line 1{TAG}"
    long = "!" + "t" * 80
    assert yaml_refused(f"a: {long} 1") == (
        f"s.yaml uses the tag '{long[:59]}... (83 characters) at line 1{TAG}")
    # the explicit plain tags are plain data
    assert load_yaml("a: !!str 1\nb: !!int '2'\nc: !!float 3\nd: !!bool yes\ne: !!null ''\nf: !!seq [1]\n"
                     "g: !!map {k: v}\nh: !!timestamp 2001-01-02\n", "s.yaml") == {
        "a": "1", "b": 2, "c": 3.0, "d": True, "e": None, "f": [1], "g": {"k": "v"}, "h": datetime.date(2001, 1, 2)}


def test_a_tag_is_refused_before_anything_is_built():
    assert yaml_refused("a: 1\na: 2\nb: !!python/name:os.system\n") == (
        f"s.yaml uses the tag '!!python/name:os.system' at line 3{TAG}")


def test_an_alias_into_itself_is_refused():
    assert yaml_refused("a: 1\nb: &x [1, *x]\n") == \
        "s.yaml has an alias that refers to itself at line 2; remove the alias"
    assert yaml_refused("a: &m {k: *m}\n") == "s.yaml has an alias that refers to itself at line 1; remove the alias"
    # an alias used twice (not into itself) is fine
    assert load_yaml("a: &x [1, 2]\nb: *x\nc: *x\n", "s.yaml") == {"a": [1, 2], "b": [1, 2], "c": [1, 2]}


def too_big(limit_nodes, limit_chars):
    return (f"s.yaml expands (through its aliases) to more than {limit_nodes:,} values or {limit_chars:,} "
            f"characters; write the data out or use fewer aliases")


def test_values_are_counted_with_every_alias_use_up_to_the_exact_limit(monkeypatch):
    # root map, a, the list, 1, 22, b, then the list again through the alias (3 more): 9 values; keys and text
    # count their characters: a 1 22 b 1 22 = 8
    text = "a: &x [1, 22]\nb: *x\n"
    monkeypatch.setattr(safe_yaml, "MAX_NODES", 9)
    monkeypatch.setattr(safe_yaml, "MAX_CHARS", 8)
    assert load_yaml(text, "s.yaml") == {"a": [1, 22], "b": [1, 22]}
    monkeypatch.setattr(safe_yaml, "MAX_NODES", 8)
    assert yaml_refused(text) == too_big(8, 8)
    monkeypatch.setattr(safe_yaml, "MAX_NODES", 9)
    monkeypatch.setattr(safe_yaml, "MAX_CHARS", 7)
    assert yaml_refused(text) == too_big(9, 7)


def test_the_limit_is_checked_inside_a_collection_not_only_at_its_end(monkeypatch):
    # a list of four one-character values: 5 values, 4 characters; the refusal comes while counting
    monkeypatch.setattr(safe_yaml, "MAX_NODES", 5)
    monkeypatch.setattr(safe_yaml, "MAX_CHARS", 4)
    assert load_yaml("[a, b, c, d]", "s.yaml") == ["a", "b", "c", "d"]
    seen = []
    real = safe_yaml.ScenarioError

    class Spy(real):
        def __init__(self, msg):
            seen.append(msg)
            super().__init__(msg)

    monkeypatch.setattr(safe_yaml, "ScenarioError", Spy)
    monkeypatch.setattr(safe_yaml, "MAX_NODES", 2)
    with pytest.raises(real):
        load_yaml("[a, b, c, d]", "s.yaml")
    assert seen[0] == too_big(2, 4)
    assert len(seen) == 2  # the size sentence, then the same sentence once in load_yaml


def test_the_alias_bomb_is_refused_at_the_real_limits_without_being_built():
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [{', '.join(['*' + prev] * 10)}]")
    assert yaml_refused("\n".join(lines)) == too_big(1_000_000, 20_000_000)


@pytest.mark.parametrize("code", [*range(0, 9), 0x0B, 0x0C, *range(0x0E, 0x20)])
def test_each_control_character_is_named_with_its_line_and_column(code):
    ch = chr(code)
    what = "a NUL byte" if code == 0 else f"the control character U+{code:04X}"
    assert yaml_refused(f"a: 1\nbb: x{ch}y\n") == (
        f"s.yaml holds {what} at line 2, column 6; remove it (a scenario file is plain text)")
    assert json_refused(f'{ch}{{"a": 1}}') == (
        f"s.json holds {what} at line 1, column 1; remove it (a scenario file is plain text)")


def test_delete_has_its_own_sentence_and_tab_newline_return_are_text():
    assert yaml_refused("ab\n\x7f") == "s.yaml holds the control character U+007F at line 2, column 1; remove it"
    assert json_refused('["\x7f"]') == "s.json holds the control character U+007F at line 1, column 3; remove it"
    assert load_yaml("a:\t1\r\nb: ' \t'\n", "s.yaml") == {"a": 1, "b": " \t"}
    assert load_yaml("a: \u00ff\u0100", "s.yaml") == {"a": "\u00ff\u0100"}
    assert load_json('{"a":\t1,\r\n"b": " "}', "s.json") == {"a": 1, "b": " "}


def test_the_first_control_character_is_the_one_named():
    assert yaml_refused("\n\x01") == (
        "s.yaml holds the control character U+0001 at line 2, column 1; remove it (a scenario file is plain text)")
    assert yaml_refused("\n\n\x01\x00") == (
        "s.yaml holds the control character U+0001 at line 3, column 1; remove it (a scenario file is plain text)")
    assert yaml_refused("abc\x00\n\x01") == (
        "s.yaml holds a NUL byte at line 1, column 4; remove it (a scenario file is plain text)")


def test_a_number_too_long_or_a_value_that_cannot_be_made_is_one_sentence():
    assert yaml_refused("a: " + "9" * 5000) == "s.yaml holds a number over 4300 digits long; keep numbers short"
    assert json_refused("[" + "9" * 5000 + "]") == "s.json holds a number over 4300 digits long; keep numbers short"
    assert yaml_refused("a: 2001-13-45") == (
        "s.yaml holds a value that cannot be read ('month must be in 1..12'); keep numbers short")
    # the reader's own words, cut at 80 characters of their repr
    said = repr("invalid literal for int() with base 10: '" + "x" * 100 + "'")
    assert len(said) == 144
    assert yaml_refused("a: !!int " + "x" * 100) == (
        f"s.yaml holds a value that cannot be read ({said[:80]}... (144 characters)); keep numbers short")


def test_too_deep_is_one_sentence_whether_the_parser_or_python_runs_out(monkeypatch):
    deep = "s.yaml nests too deeply to read; flatten its lists and mappings"
    assert yaml_refused("a: " + "[" * 1100) == deep  # libyaml's own depth limit
    assert load_yaml("a: " + "[" * 300 + "]" * 300, "s.yaml")["a"] != []

    def overflow(node, name):
        raise RecursionError

    monkeypatch.setattr(safe_yaml, "_check_tree", overflow)
    assert yaml_refused("a: 1") == deep
    assert json_refused("[" * 100_000 + "]" * 100_000) == \
        "s.json nests too deeply to read; flatten its lists and objects"


def test_bad_yaml_syntax_names_the_line():
    assert yaml_refused("a: [1, 2") == "s.yaml is not valid YAML at line 2; fix the syntax there"
    assert yaml_refused("a: 1\nb: c: d\n") == "s.yaml is not valid YAML at line 2; fix the syntax there"
    assert yaml_refused("a: 1\n- b\n") == "s.yaml is not valid YAML at line 2; fix the syntax there"


def test_bad_yaml_without_a_mark_has_no_line(monkeypatch):
    import yaml

    def fail(self):
        raise yaml.YAMLError("no mark here")

    monkeypatch.setattr(safe_yaml._Loader, "get_single_node", fail)
    assert yaml_refused("a: 1") == "s.yaml is not valid YAML; fix the syntax there"


def test_a_context_mark_names_the_line_when_there_is_no_problem_mark(monkeypatch):
    import yaml

    class Mark:
        line = 6

    def fail(self):
        raise yaml.MarkedYAMLError(context="while here", context_mark=Mark())

    monkeypatch.setattr(safe_yaml._Loader, "get_single_node", fail)
    assert yaml_refused("a: 1") == "s.yaml is not valid YAML at line 7; fix the syntax there"


def test_json_reads_plain_data_and_refuses_duplicates_and_constants():
    assert load_json('{"a": [1, 2.5, "x", true, null], "b": {}}', "s.json") == {
        "a": [1, 2.5, "x", True, None], "b": {}}
    assert json_refused('{"a": 1, "b": {"c": 1, "c": 2}}') == "s.json: duplicate key 'c'; give each key once"
    assert json_refused('{"' + "q" * 70 + '": 1, "' + "q" * 70 + '": 2}') == (
        f"s.json: duplicate key '{'q' * 59}... (72 characters); give each key once")
    for word in ("NaN", "Infinity", "-Infinity"):
        assert json_refused(f'{{"a": {word}}}') == f"s.json: {word} is not a JSON number; write a whole number"


def test_bad_json_syntax_quotes_the_parser():
    assert json_refused('{"a": 1,}') == ("s.json is not valid JSON (Expecting property name enclosed in double quotes: "
                                         "line 1 column 9 (char 8)); fix the syntax at that line")
    assert json_refused("[1, 2") == ("s.json is not valid JSON (Expecting ',' delimiter: line 1 column 6 (char 5)); "
                                     "fix the syntax at that line")
    assert json_refused("") == ("s.json is not valid JSON (Expecting value: line 1 column 1 (char 0)); "
                                "fix the syntax at that line")


def test_cut_keeps_120_characters():
    assert _cut("x" * 120) == "x" * 120
    assert _cut("x" * 121) == "x" * 120 + "..."
    assert _cut("abcdef", 3) == "abc..."
