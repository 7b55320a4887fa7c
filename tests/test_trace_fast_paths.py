"""The fast paths that keep ``simcache run --json`` within 5x of the tracing-off replay (#12) give the answers of
the plain code they replace, exactly.

Story: a scenario file is scanned for control characters by one regular expression, and the first one is named
as the per-character loop named it; the boundary check's kv mask and wanted content, written slot by slot as
shares move, equal the ones rebuilt from scratch after every operation, and a violation that begins in an
operation that touched no slot is still caught and dated at that operation.
"""
from __future__ import annotations

import pytest

from simcache import invariants, trace
from simcache.errors import ScenarioError
from simcache.safe_yaml import _check_characters, _where


def _per_character(text: str, name: str) -> None:  # the loop the regular expression replaced
    for i, ch in enumerate(text):
        if ch < " " and ch not in "\t\n\r":
            what = "a NUL byte" if ch == "\0" else f"the control character U+{ord(ch):04X}"
            raise ScenarioError(f"{name} holds {what} at {_where(text, i)}; remove it (a scenario file is plain "
                                f"text)")
        if ch == "\x7f":
            raise ScenarioError(f"{name} holds the control character U+007F at {_where(text, i)}; remove it")


def _said(check, text: str) -> str | None:
    try:
        check(text, "ops.yaml")
    except ScenarioError as e:
        return str(e)
    return None


def test_the_control_character_scan_names_the_first_one_as_the_loop_did():
    texts = [chr(c) for c in range(0x100)] + [
        "ops:\n\t- evict 2\r\n", "a\nbc\x7f\x00", "é\n\n  x\x1f", "x" * 5000 + "\n\x0b", "\u2028\x85 fine"]
    for text in texts:
        assert _said(_check_characters, text) == _said(_per_character, text), repr(text)
    assert _said(_check_characters, "a\nbc\x7f\x00") == \
        "ops.yaml holds the control character U+007F at line 2, column 3; remove it"
    assert _said(_check_characters, "ops:\n  - x\x00") == \
        "ops.yaml holds a NUL byte at line 2, column 6; remove it (a scenario file is plain text)"
    assert _said(_check_characters, "\t\n\r ok") is None


def _kv_state_from_scratch(bc) -> dict:
    """The kv check's mask and wanted content as ``_rewant`` over every slot would make them."""
    out = {}
    for pool in invariants._POOL_NAMES:
        cnt, exp = bc.cnt[pool], bc.exp[pool]
        out[pool] = ([-1 if c > 0 else 0 for c in cnt], [e if c > 0 else 0 for c, e in zip(cnt, exp, strict=True)])
    return out


def test_the_kv_mask_written_slot_by_slot_equals_the_one_rebuilt_from_scratch(monkeypatch):
    from test_trace_scale import small_workload

    from simcache.simulate import simulate

    real = invariants.BoundaryCheck.failing
    checked = 0

    def both(self, live=()):
        nonlocal checked
        got = real(self, live)
        want = _kv_state_from_scratch(self)
        for pool, (mask, wanted) in want.items():
            assert self.mask[pool].tolist() == mask and self.want[pool].tolist() == wanted, (checked, pool)
            if self.want_bytes[pool] is not None:
                assert self.want_bytes[pool] == self.want[pool].tobytes()
        checked += 1
        return got

    monkeypatch.setattr(invariants.BoundaryCheck, "failing", both)
    run = simulate(dict(name="w", **small_workload(80)), "followup_fix", snapshots=False)
    assert checked == len(run.trace.ops) > 80


def test_a_violation_that_begins_in_an_operation_touching_no_slot_is_dated_there():
    """Between two operations the size counter is bumped by hand; the next operation (an ``events`` poll with
    nothing to ack: no slot, no node changes) ends with the counters wrong, and the violation is dated to that
    operation's last micro-step, as the named check would date it."""
    from test_trace_scale import small_workload

    from simcache.ops_run import check_doc, execute
    from simcache.versions import preset as flags_of

    doc = small_workload(30)
    doc["ops"] = doc["ops"][:20] + [{"op": "events"}] + doc["ops"][20:]
    cfg, ops = check_doc(doc)

    def bump(i, cache, drv):
        if i == 19:
            cache.full_evictable_size_ += 1

    def run(recorder):
        execute(cfg, [(None, op) for op in ops], flags_of("followup_fix"), recorder=recorder, on_step=bump)
        return recorder

    rec = run(trace.Recorder(snapshots=False))
    first = rec.ops[20]
    assert rec.ops[20].op == {"op": "events"}
    assert {s.kind for s in rec.steps[first.first_step : first.last_step + 1]} == {"op", "call"}  # no slot moved
    assert [v.as_dict() for v in rec.violations] == [dict(
        step=first.last_step, op=20, invariant="size_counters",
        message="full counters evictable=82 protected=0, recount 81 and 0")]
    # the same run checked by the plain one-pass check at every boundary gives the same violations
    plain = trace.Recorder(snapshots=False)
    plain_bc = pytest.MonkeyPatch()
    plain_bc.setattr(trace.ledger, "BoundaryCheck", _Plain)
    try:
        assert [v.as_dict() for v in run(plain).violations] == [v.as_dict() for v in rec.violations]
    finally:
        plain_bc.undo()


class _Plain:
    """A boundary check that answers with the one-pass ``failing`` (no incremental state)."""

    def __init__(self, cache) -> None:
        self.cache, self.memo, self.seen, self.links = cache, {}, set(), []

    def see(self, node) -> None:
        pass

    def moved(self, node) -> None:
        pass

    def pool_event(self, pool, what, slots) -> None:
        pass

    def relinked(self, parent, child) -> None:
        pass

    def failing(self, live=()) -> set[str]:
        return invariants.failing(self.cache, live, self.memo)
