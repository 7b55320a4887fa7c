"""The cases of the trace-equivalence test (``test_trace_equivalence.py``) and what each run is reduced to.

``tests/fixtures/trace_golden.json`` holds these results as the per-micro-step-snapshot implementation produced
them (generated once, before traces became events + checkpoints, by ``python tests/trace_cases.py``); the test
checks that today's code still produces them exactly: went stale, cleaned up, re-admitted, first violation,
violation counts, outcome, the trace hash, and a digest of every micro-step's snapshot.

The random operation files are a frozen copy of ``tools/compare_with_oracle.random_doc`` (so a change there cannot
silently change the cases), plus random interleavings of the gallery scenarios' actors.
"""
from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "fixtures" / "trace_golden.json"
N_RANDOM_DOCS = 240
N_SCHEDULES = 8  # random interleavings per gallery scenario
# the presets the old recorder ran when the golden file was made (main_2026_06 came later; it shares their code paths)
GOLDEN_PRESETS = ("pre_fix", "described_fix", "reviewed_fix", "merged_fix", "followup_fix")


def random_doc(rng: random.Random) -> dict:
    ps = rng.choice([1, 1, 1, 2])
    policy = rng.choice(["write_through", "write_through", "write_through_selective", "write_back"])
    storage = rng.random() < 0.5
    cfg = dict(policy=policy, storage=storage, page_size=ps, device_kv=rng.choice([12, 16, 24, 32]),
               device_mamba=rng.choice([3, 4, 6, 8]), host_kv=rng.choice([2, 4, 6, 8]),
               host_mamba=rng.choice([1, 2, 4, 8]), driver=rng.choice(["fuzz", "scheduler"]),
               load_back_threshold=rng.choice([1, 2, 10]),
               prefetch_stop_policy=rng.choice(["best_effort", "best_effort", "wait_complete", "timeout"]))
    alphabet = [1, 2, 3, 4, 5]
    prefixes = [[1, 2], [1, 2, 3, 4], [5, 6], [1, 3]]

    def tokens():
        base = list(rng.choice(prefixes)) if rng.random() < 0.7 else []
        base += [rng.choice(alphabet) for _ in range(rng.randint(1, 4))]
        if ps > 1 and len(base) < ps:
            base += [7] * (ps - len(base))
        return base

    ops = []
    if rng.random() < 0.4:
        nodes, used = [], set()
        for j in range(rng.randint(1, 4)):
            parent = rng.choice([None] + list(range(j)))
            first = rng.choice([k for k in range(1, 10) if (parent, k) not in used] or [99])
            used.add((parent, first))
            host = rng.random() < 0.7
            dev = not host or rng.random() < 0.3
            nodes.append(dict(key=[first] * ps if ps > 1 else [first] + ([] if rng.random() < 0.5 else [first + 1]),
                              parent=parent, device=dev, mamba=dev and rng.random() < 0.5, host=host,
                              mamba_host=host and rng.random() < 0.5, hash=host and storage,
                              l3_backup=host and storage and rng.random() < 0.5))
        cfg["device_kv"], cfg["host_kv"] = 32, max(cfg["host_kv"], 10)
        cfg["device_mamba"], cfg["host_mamba"] = 8, 8
        ops.append({"op": "inject", "nodes": nodes})
    for _ in range(rng.randint(4, 18)):
        r = rng.random()
        if r < 0.35:
            ops.append({"op": "request", "tokens": tokens()})
        elif r < 0.45:
            ops.append({"op": "start", "tokens": tokens()})
        elif r < 0.52:
            ops.append({"op": "finish_oldest"})
        elif r < 0.62:
            ops.append({"op": "evict", "n": rng.randint(1, 6)})
        elif r < 0.67:
            ops.append({"op": "evict_mamba", "n": rng.randint(1, 2)})
        elif r < 0.74:
            ops.append({"op": "evict_host", "n": rng.randint(1, 4)})
        elif r < 0.82:
            ops.append({"op": "events"})
        elif r < 0.88 and storage:
            ops.append({"op": "l3_ack"})
        elif r < 0.94 and storage:
            ops.append({"op": "prefetch", "tokens": tokens()})
        elif storage:
            ops.append({"op": "prefetch_done", "n": rng.randint(0, 6), "mamba_hit": rng.random() < 0.6})
        else:
            ops.append({"op": "events"})
    return {"config": cfg, "ops": ops}


def random_schedule(sc, rng: random.Random) -> str:
    """A random interleaving of the scenario's actors, each taking all its operations."""
    turns = list(sc.parse_schedule(None).turns)
    rng.shuffle(turns)
    return " ".join(turns)


def cases() -> list[tuple[str, object, str, str | None]]:
    """(case id, scenario (name or scenario object), preset, schedule or None)."""
    from simcache.scenario import from_doc, gallery, load
    out = []
    for name in sorted(gallery()):
        sc = load(name)
        rng = random.Random(f"trace-equivalence:{name}")
        scheds = [None] + [random_schedule(sc, rng) for _ in range(N_SCHEDULES)]
        for preset in GOLDEN_PRESETS:
            for j, s in enumerate(scheds):
                out.append((f"{name}/{preset}/{j}", name, preset, s))
    rng = random.Random("trace-equivalence:docs")
    for i in range(N_RANDOM_DOCS):
        doc = random_doc(rng)
        preset = ("pre_fix", "described_fix", "reviewed_fix", "merged_fix", "followup_fix")[i % 5]
        out.append((f"random/{i}/{preset}", from_doc(dict(name=f"random_{i}", **doc)), preset, None))
    return out


def snapshot_digest(trace) -> str:
    h = hashlib.sha256(repr(trace.initial).encode())
    for s in trace.snapshots:
        h.update(repr(s).encode())
    return h.hexdigest()


def reduce_run(run, snapshots: bool = True) -> dict:
    j = run.to_json()
    out = {k: j[k] for k in ("outcome", "went_stale", "cleaned_up", "readmitted", "first_violation", "violations",
                             "trace_sha256", "steps", "operations", "status", "tree")}
    if snapshots:
        out["snapshots"] = snapshot_digest(run.trace)
    return out


def compute(case, snapshots: bool = True) -> dict:
    from simcache.simulate import simulate

    _, scenario, preset, schedule = case
    return reduce_run(simulate(scenario, preset, schedule=schedule, snapshots=snapshots), snapshots)


def main() -> int:
    res = {c[0]: compute(c) for c in cases()}
    GOLDEN.write_text(json.dumps(res, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{len(res)} cases -> {GOLDEN}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
