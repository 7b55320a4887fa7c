"""Parsing a scenario file's text into plain data, refusing what plain data cannot hold.

- Duplicate keys in one mapping (YAML or JSON) are an error: the second silently replacing the first hides a mistake.
- YAML aliases are expanded by reference; a file whose aliases would expand past ``MAX_NODES`` nodes or
  ``MAX_CHARS`` characters of text (a "billion laughs"), or that refers to itself, is refused before it is built.
- Only plain data tags are accepted: ``!!python/object`` and any other tag is named, with its line, and refused.
- A NUL byte or another control character is reported with its line and column.
"""
from __future__ import annotations

import json
import re
from typing import Any

import yaml

from .errors import ScenarioError
from .errors import shown as _short

MAX_NODES = 1_000_000
MAX_CHARS = 20_000_000
_PLAIN = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map", "merge",
                                              "timestamp")}
_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE):  # type: ignore[misc,valid-type]
    """A safe loader that refuses duplicate keys."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (list, dict)):  # a complex key ``? [1, 2]``: valid YAML, not plain data
                    kind = "list" if isinstance(key, list) else "mapping"
                    raise ScenarioError(f"a {kind} is used as a mapping key at line {key_node.start_mark.line + 1} (a "
                                        f"YAML complex key, '? ...'); keys are plain text, so write the key as text")
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:  # another unhashable key: the constructor reports it
                    continue
                if first is not key_node:
                    raise ScenarioError(f"duplicate key {_short(key)} at line {key_node.start_mark.line + 1} "
                                        f"(first at line {first.start_mark.line + 1}); give each key once")
        return super().construct_mapping(node, deep=deep)


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {col}"


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # control characters but tab, newline, return


def _check_characters(text: str, name: str) -> None:
    bad = _CONTROL.search(text)  # the first one, found at C speed (a long operation file is megabytes)
    if bad is None:
        return
    i, ch = bad.start(), bad.group()
    if ch == "\x7f":
        raise ScenarioError(f"{name} holds the control character U+007F at {_where(text, i)}; remove it")
    what = "a NUL byte" if ch == "\0" else f"the control character U+{ord(ch):04X}"
    raise ScenarioError(f"{name} holds {what} at {_where(text, i)}; remove it (a scenario file is plain text)")


def _check_tree(node, name: str) -> None:
    """Refuse odd tags and measure the expanded size (aliases counted every time they are used)."""
    sizes: dict[int, tuple[int, int]] = {}
    busy: set[int] = set()

    def size(n) -> tuple[int, int]:
        k = id(n)
        if k in sizes:
            return sizes[k]
        if n.tag not in _PLAIN:
            tag = n.tag.replace("tag:yaml.org,2002:", "!!")
            raise ScenarioError(f"{name} uses the tag {_short(tag)} at line {n.start_mark.line + 1}; scenario files "
                                f"hold plain data only (text, numbers, lists, mappings), so remove the tag")
        if k in busy:
            raise ScenarioError(f"{name} has an alias that refers to itself at line {n.start_mark.line + 1}; "
                                f"remove the alias")
        if isinstance(n, yaml.ScalarNode):
            out = (1, len(n.value))
        else:
            busy.add(k)
            children = n.value if isinstance(n, yaml.SequenceNode) else [c for kv in n.value for c in kv]
            nodes, chars = 1, 0
            for c in children:
                cn, cc = size(c)
                nodes, chars = nodes + cn, chars + cc
                if nodes > MAX_NODES or chars > MAX_CHARS:
                    raise ScenarioError(f"{name} expands (through its aliases) to more than {MAX_NODES:,} values "
                                        f"or {MAX_CHARS:,} characters; write the data out or use fewer aliases")
            busy.discard(k)
            out = (nodes, chars)
        sizes[k] = out
        return out

    size(node)


def load_yaml(text: str, name: str) -> Any:
    """Plain data from YAML text; every problem is one ``ScenarioError`` sentence naming ``name`` and a line."""
    _check_characters(text, name)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_tree(node, name)
        return loader.construct_document(node)
    except ScenarioError as e:
        msg = str(e)
        raise ScenarioError(msg if msg.startswith(name) else f"{name}: {msg}") from None
    except RecursionError:
        raise ScenarioError(f"{name} nests too deeply to read; flatten its lists and mappings") from None
    except ValueError as e:  # int() of a number over Python's 4300-digit limit
        if "digits" in str(e):
            raise ScenarioError(f"{name} holds a number over 4300 digits long; keep numbers short") from None
        raise ScenarioError(f"{name} holds a value that cannot be read ({_short(str(e), 80)}); keep numbers "
                            f"short") from None
    except yaml.YAMLError as e:
        if "nesting depth" in str(e):  # libyaml's own limit
            raise ScenarioError(f"{name} nests too deeply to read; flatten its lists and mappings") from None
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ScenarioError(f"{name} is not valid YAML{at}; fix the syntax there") from None
    finally:
        loader.dispose()


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ScenarioError(f"duplicate key {_short(k)}; give each key once")
        out[k] = v
    return out


def load_json(text: str, name: str) -> Any:
    _check_characters(text, name)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except ScenarioError as e:
        raise ScenarioError(f"{name}: {e}") from None
    except ValueError as e:
        if "digits" in str(e):
            raise ScenarioError(f"{name} holds a number over 4300 digits long; keep numbers short") from None
        raise ScenarioError(f"{name} is not valid JSON ({_cut(str(e))}); fix the syntax at that line") \
            from None
    except RecursionError:
        raise ScenarioError(f"{name} nests too deeply to read; flatten its lists and objects") from None


def _no_constant(word: str):
    raise ScenarioError(f"{word} is not a JSON number; write a whole number")


def _cut(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
