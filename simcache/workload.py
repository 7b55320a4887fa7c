"""Workload mode: seeded, realistic request streams under host-memory pressure, and the crash rate they reach.

Vocabulary
- A *stream* is an oracle-format operation list (``{"config": .., "ops": [..]}``, runnable by ``run_ops`` and by the
  oracle): a few shared *system prompts*; *chats* whose every turn extends the previous turn's prompt and answer
  (so prefixes are shared and re-used, as in multi-turn serving); random prompt and answer lengths; requests that
  overlap (``start`` .. ``finish_oldest``); cache-controller acks (``events``) and storage acks (``l3_ack``); storage
  *prefetches* of a chat's next turn with their completion (``prefetch_done``, a hit or a miss); and device memory
  pressure (``evict``).
- The *working set* is the number of distinct token prefixes the stream ever caches (the size of the trie of all
  its requests), i.e. the host KV a cache would need to keep all of it; each distinct request also leaves one
  Mamba state. *Host pressure* ``p`` sets ``host_kv = ceil(working_set / p)`` and ``host_mamba = ceil(states /
  p)``: at ``p <= 1`` everything fits on the host; at ``p = 4`` a quarter does. The device pools stay small and
  fixed (the longest request plus some slack), so device evictions happen at every pressure.

``crash_rates(presets, pressures, n_streams, seed)`` runs the same ``n_streams`` streams (stream ``i`` is drawn from
``(seed, i)`` alone) under every preset and pressure on the fast path (no recorder) and reports, per preset and
pressure, the fraction of runs that raised (``crash_rate``), that hit the stale-node assertion (``race_rate``) and
that left leaked or double-freed slots (``damage_rate``). Parallel runs (``jobs``, processes) give the same rows.

The command line is ``simcache workload`` (``python -m simcache workload``); ``python -m simcache.workload`` is the
same command, with the same parser and defaults (``cli.py`` builds it; the chat turns per stream default to
``WorkloadSpec.requests``).
"""
from __future__ import annotations

import math
import random
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from .crash import STALE, signature
from .errors import SimcacheError
from .versions import PRESETS


class WorkloadError(SimcacheError):
    """Workload arguments that do not fit."""


@dataclass(frozen=True)
class WorkloadSpec:
    requests: int = 32  # chat turns in a stream
    system_prompts: int = 2
    chats: int = 4
    prompt_len: tuple[int, int] = (2, 4)  # system prompt length range
    user_len: tuple[int, int] = (1, 3)  # tokens a user adds per turn
    answer_len: tuple[int, int] = (1, 2)  # tokens the model answers per turn
    overlap: float = 0.4  # chance a turn stays running while the next operations happen
    prefetch: float = 0.5  # chance, per turn, that a storage prefetch starts (one at a time)
    prefetch_delay: int = 3  # most turns a prefetch stays in flight
    prefetch_hit: float = 0.7  # chance a prefetch also restores the Mamba state
    acks: float = 0.5  # chance of a controller ack (``events``) / storage ack after each turn
    evict: float = 0.0  # chance of an explicit device eviction after each turn (0: only when a request needs room)
    evict_max: int = 4
    device_slack: int = 4  # device KV = longest request + slack: device pressure is steady
    policy: str = "write_through"


def _draw(rng: random.Random, span: tuple[int, int]) -> int:
    return rng.randint(span[0], span[1])


def generate(seed: int, pressure: float, spec: WorkloadSpec = WorkloadSpec(), index: int = 0) -> dict:
    """Stream ``index`` of ``seed`` as an oracle-format document, its host pool sized for ``pressure``."""
    rng = random.Random(f"simcache-workload:{seed}:{index}")
    prompts = [[100 * (k + 1) + i for i in range(_draw(rng, spec.prompt_len))] for k in range(spec.system_prompts)]
    history = [list(rng.choice(prompts)) for _ in range(spec.chats)]
    fresh = [1000 * (c + 1) for c in range(spec.chats)]  # each chat's own token numbers
    planned: dict[int, list[int]] = {}  # chat -> its next prompt, when already drawn (prefetched)

    def new_tokens(c: int, n: int) -> list[int]:
        out = list(range(fresh[c], fresh[c] + n))
        fresh[c] += n
        return out

    def next_prompt(c: int) -> list[int]:
        if c not in planned:
            planned[c] = history[c] + new_tokens(c, _draw(rng, spec.user_len))
        return planned[c]

    ops: list[dict] = []
    requests: list[list[int]] = []
    running, inflight = 0, None  # inflight: turns left until the storage prefetch completes
    for _ in range(spec.requests):
        if inflight is None and rng.random() < spec.prefetch:
            # the scheduler prefetches a waiting chat's prompt from storage; it lands a few turns later
            tokens = next_prompt(rng.randrange(spec.chats))
            ops.append({"op": "prefetch", "tokens": list(tokens)})
            inflight = (rng.randint(0, spec.prefetch_delay), len(tokens))
        c = rng.randrange(spec.chats)
        tokens = next_prompt(c)
        del planned[c]
        ops.append({"op": "start" if rng.random() < spec.overlap else "request", "tokens": list(tokens)})
        running += ops[-1]["op"] == "start"
        requests.append(tokens)
        history[c] = tokens + new_tokens(c, _draw(rng, spec.answer_len))
        if running and rng.random() < 0.5:
            ops.append({"op": "finish_oldest"})
            running -= 1
        if rng.random() < spec.acks:
            ops.append({"op": rng.choice(["events", "l3_ack"])})
        if rng.random() < spec.evict:
            ops.append({"op": "evict", "n": rng.randint(1, spec.evict_max)})
        if inflight is not None:
            if inflight[0] == 0:
                ops.append({"op": "prefetch_done", "n": rng.randint(1, inflight[1]),
                            "mamba_hit": rng.random() < spec.prefetch_hit})
                inflight = None
            else:
                inflight = (inflight[0] - 1, inflight[1])
    ops += [{"op": "finish_oldest"}] * running + [{"op": "events"}, {"op": "l3_ack"}]
    working, states = working_set(requests), len({tuple(r) for r in requests})
    config = dict(policy=spec.policy, storage=True, device_kv=max(len(r) for r in requests) + spec.device_slack,
                  device_mamba=spec.chats + 2, host_kv=max(1, math.ceil(working / pressure)),
                  host_mamba=max(1, math.ceil(states / pressure)))
    return {"config": config, "ops": ops, "working_set": working, "mamba_states": states}


def working_set(requests: Sequence[Sequence[int]]) -> int:
    """Distinct prefixes (trie nodes at token granularity) over all requests."""
    return len({tuple(r[: i + 1]) for r in requests for i in range(len(r))})


@dataclass(frozen=True)
class RateRow:
    preset: str
    pressure: float
    runs: int
    crashes: int
    races: int
    damaged: int

    @property
    def crash_rate(self) -> float:
        return self.crashes / self.runs if self.runs else 0.0

    @property
    def race_rate(self) -> float:
        return self.races / self.runs if self.runs else 0.0

    @property
    def damage_rate(self) -> float:
        return self.damaged / self.runs if self.runs else 0.0

    def as_dict(self) -> dict:
        return dict(asdict(self), crash_rate=self.crash_rate, race_rate=self.race_rate,
                    damage_rate=self.damage_rate)


def run_stream(task: tuple[str, float, int, int, WorkloadSpec]) -> tuple[str | None, bool]:
    """(the crash's signature or None, damage left) of one stream under one preset and pressure (fast path)."""
    from .ops_run import check_doc, execute
    from .versions import preset as preset_flags

    name, pressure, seed, index, spec = task
    doc = generate(seed, pressure, spec, index)
    cfg, ops = check_doc(doc)
    r = execute(cfg, [(None, op) for op in ops], preset_flags(name))
    damaged = bool(r["double_frees"]) or any(a["leaked"] for a in r["accounting"].values())
    return (None if r["_crash"] is None else signature(r["_crash"])), damaged


def crash_rates(presets: Sequence[str] = ("pre_fix", "merged_fix", "followup_fix"),
                pressures: Sequence[float] = (0.5, 1, 2, 4, 8), n_streams: int = 50, seed: int = 0,
                jobs: int = 1, spec: WorkloadSpec = WorkloadSpec(),
                progress: Callable[[dict], None] | None = None) -> list[dict]:
    """One row per (preset, pressure): ``{preset, pressure, crash_rate, race_rate, damage_rate, runs, ...}``.
    The command line's caps hold here too: at most 100,000 streams, 10,000 chat turns a stream, 64 jobs and
    20,000,000 chat turns in all."""
    from .cli_numbers import LIMITS, MAX_WORKLOAD_TURNS
    from .errors import shown

    for label, v in (("presets", presets), ("pressures", pressures)):
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
            raise WorkloadError(f"{label} must be a list, like {['pre_fix'] if label == 'presets' else [0.5, 1, 2]}, "
                                f"not {shown(v, 40)}")
    bad = [p for p in presets if not isinstance(p, str) or p not in PRESETS]
    if bad:
        said = (p if isinstance(p, str) and p.isprintable() and len(p) <= 40 else shown(p, 40) for p in bad[:5])
        raise WorkloadError(f"unknown preset(s) {', '.join(said)}; choose from "
                            f"{', '.join(PRESETS)}")
    if not pressures or any(not isinstance(p, (int, float)) or isinstance(p, bool) or not 1e-3 <= p <= 1e6
                            for p in pressures):
        raise WorkloadError("pressures must be numbers between 0.001 and 1000000, like 0.5 1 2 4 "
                            "(working set / host KV slots)")
    if not isinstance(spec, WorkloadSpec):
        raise WorkloadError(f"spec must be a WorkloadSpec, like WorkloadSpec(requests=32), not {shown(spec, 40)}")
    for label, v, option in (("n_streams", n_streams, "streams"), ("jobs", jobs, "jobs"),
                             ("spec.requests", spec.requests, "requests"), ("seed", seed, "seed")):
        low, high = LIMITS[option]
        if type(v) is not int or v < low:
            raise WorkloadError(f"{label} must be a whole number >= {low:,}, not {shown(v, 40)}")
        if v > high:
            raise WorkloadError(f"{label} {v:,} is over the limit of {high:,}; give a smaller number")
    turns = n_streams * spec.requests * len(presets) * len(pressures)
    if turns > MAX_WORKLOAD_TURNS:
        raise WorkloadError(f"this workload has {turns:,} chat turns (streams x requests x presets x pressures); keep "
                            f"it under {MAX_WORKLOAD_TURNS:,}")
    if progress is not None and not callable(progress):
        raise WorkloadError(f"progress must be a function taking a dict, or None, not {shown(progress, 40)}")
    tasks = [(name, float(p), seed, i, spec) for name in presets for p in pressures for i in range(n_streams)]
    if jobs > 1:
        from .pool import Pool, mp_context, quiet_worker, worker_deaths, workers_for

        with Pool(workers_for(jobs, len(tasks)), mp_context=mp_context(),
                  initializer=quiet_worker) as pool, worker_deaths(pool, "the workload"):
            results = list(_tick(pool.map(run_stream, tasks, chunksize=max(1, len(tasks) // (8 * jobs))),
                                 len(tasks), progress))
    else:
        results = list(_tick(map(run_stream, tasks), len(tasks), progress))
    rows = []
    for k, (name, p) in enumerate((n, p) for n in presets for p in pressures):
        chunk = results[k * n_streams : (k + 1) * n_streams]
        sigs = Counter(sig for sig, _ in chunk if sig is not None)
        row = RateRow(name, float(p), n_streams, sum(sigs.values()), sum(n for sig, n in sigs.items() if STALE in sig),
                      sum(d for _, d in chunk)).as_dict()
        row["signatures"] = dict(sorted(sigs.items()))
        rows.append(row)
    return rows


def _tick(items, total: int, progress):
    for i, item in enumerate(items, 1):
        if progress is not None:
            progress(dict(runs=i, total=total))
        yield item


def table(rows: list[dict]) -> str:
    """A markdown table: crash / race / damage rate per preset (rows) and pressure (columns)."""
    pressures = sorted({r["pressure"] for r in rows})
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    at = {(r["preset"], r["pressure"]): r for r in rows}
    head = "| preset | " + " | ".join(f"p={p:g}" for p in pressures) + " |"
    lines = [head, "|---" * (len(pressures) + 1) + "|"]
    for name in presets:
        cells = [f"{at[name, p]['crash_rate']:.0%} ({at[name, p]['race_rate']:.0%} race)" for p in pressures]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":  # ``python -m simcache.workload``: the one parser and defaults of ``simcache workload``
    from simcache.cli import main

    sys.exit(main(["workload", *sys.argv[1:]]))
