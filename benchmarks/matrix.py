"""The benchmark matrix (#41): prompt lengths x page sizes x write policies, one seeded workload per cell.

A cell's workload is a stream of multi-turn chats over a few shared system prompts, as a chat service sees them:
a request either opens a chat (a system prompt and a first user turn) or continues one (the chat so far, the
model's answer and a new user turn), so prefixes are shared and re-used. Lengths are drawn from log-normal laws
(long tails: a few prompts are several times the mean, at most ``TAIL`` times); a chat that would outgrow
``RESTART`` times the mean starts over. Controller acks come every 8 requests and a device eviction of three mean
prompts every 50; the device pool holds about 18 mean prompts and the host pool twice that, so both tiers fill and
evict on every cell (in ``--quick`` mode the long-prompt cells evict only on the device). The scheduler's driver
runs the requests (``driver: scheduler``); L3 storage is off.

``cells(quick)`` lists the cells; ``workload(mean, requests, page_size, policy)`` builds one cell's document.
"""
from __future__ import annotations

import math
import random

MEANS = (50, 300, 2000)  # the prompt lengths of the matrix (tokens, means)
PAGE_SIZES = (1, 16)
POLICIES = ("write_through", "write_through_selective", "write_back")
TAIL = 6  # a prompt is at most TAIL x the mean
RESTART = 3  # a chat that would grow past RESTART x the mean starts over
# requests per cell: about the same number of tokens per cell, so every cell takes comparable time
REQUESTS = {50: 2000, 300: 1000, 2000: 250}
QUICK_REQUESTS = {50: 600, 300: 300, 2000: 100}


def _lognormal(rng: random.Random, mean: float, sigma: float = 0.8) -> int:
    """A log-normal draw with this mean (sigma 0.8: the 99th percentile is about 4.5x the mean)."""
    return max(1, round(rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)))


def workload(mean: int, requests: int, page_size: int = 1, policy: str = "write_through_selective",
             seed: int = 0) -> dict:
    """One cell's oracle-format document: ``requests`` chat requests whose prompts average about ``mean`` tokens."""
    rng = random.Random(f"simcache-matrix:{mean}:{seed}")
    fresh = iter(range(50, 1 << 30))  # every drawn token is new: shared prefixes come only from chats and systems
    systems = [[next(fresh) for _ in range(_lognormal(rng, 0.4 * mean, 0.5))] for _ in range(6)]
    chats: list[list[int]] = []
    ops: list[dict] = []
    cap = TAIL * mean
    for r in range(requests):
        if chats and rng.random() < 0.6:  # a follow-up: the answer and a new user turn extend the chat
            i = rng.randrange(len(chats))
            toks = chats[i] + [next(fresh) for _ in range(_lognormal(rng, 0.2 * mean))]
            if len(toks) > RESTART * mean:
                toks = list(rng.choice(systems)) + [next(fresh) for _ in range(_lognormal(rng, 0.5 * mean))]
            chats[i] = toks
        else:
            toks = list(rng.choice(systems)) + [next(fresh) for _ in range(_lognormal(rng, 0.5 * mean))]
            chats.append(toks)
            if len(chats) > 48:
                chats.pop(0)
        toks = toks[:cap]
        if page_size > 1 and len(toks) < page_size:
            toks = toks + [next(fresh) for _ in range(page_size - len(toks))]
        ops.append({"op": "request", "tokens": toks})
        if r % 8 == 7:
            ops.append({"op": "events"})
        if r % 50 == 49:
            ops.append({"op": "evict", "n": 3 * mean})
    device_kv = 12 * mean + cap
    cfg = dict(policy=policy, storage=False, page_size=page_size, device_kv=device_kv, device_mamba=256,
               host_kv=2 * device_kv, host_mamba=512, load_back_threshold=10, driver="scheduler")
    return {"config": cfg, "ops": ops}


def prompt_stats(doc: dict) -> tuple[float, int]:
    """(mean, longest) prompt length of a document's requests."""
    lens = [len(op["tokens"]) for op in doc["ops"] if op["op"] == "request"]
    return sum(lens) / len(lens), max(lens)


def cells(quick: bool = False, means=MEANS, page_sizes=PAGE_SIZES, policies=POLICIES):
    """(mean, requests, page size, policy) for every cell, the longest prompts first (the likely worst cells)."""
    counts = QUICK_REQUESTS if quick else REQUESTS
    return [(m, counts.get(m, max(20, 100_000 // m)), ps, pol) for m in sorted(means, reverse=True)
            for ps in page_sizes for pol in policies]
