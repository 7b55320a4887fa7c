"""``python -m simcache explore``: search, optionally shrink, print a summary (or JSON), write artefacts."""
from __future__ import annotations

import json

from ..crash import STALE  # the race this project teaches; preferred when choosing what to shrink
from ..errors import ScenarioError, SimcacheError
from ..progress import progress_for
from ..scenario import load
from ..versions import parse_flag
from .results import ExploreResult, Failure, count_text
from .search import explore

DEFAULT_BOUND = 2  # the CLI's preemption bound when none is given (the API's default is no bound)


def pick_failure(res: ExploreResult) -> Failure | None:
    """The stale-node race's first failure if the search saw it, else the first failure."""
    return res.failure_with(STALE) or res.first_failure


def summary(res: ExploreResult, minimal: dict | None) -> str:
    what = {"exhaustive": f"exhaustive, preemption bound {res.bound if res.bound is not None else 'none'}",
            "random": f"random, seed {res.seed}", "pct": f"PCT depth {res.bound}, seed {res.seed}"}[res.strategy]
    lines = [f"{res.scenario} under {res.preset}: {what}",
             f"  schedules run     {res.schedules_run} of {count_text(res.total_schedules)} interleavings"
             + (f"  ({res.pruned} prefixes pruned as already-seen states)" if res.strategy == "exhaustive" else ""),
             f"  distinct states   {res.distinct_states} end states",
             f"  failing           {res.failing} ({100 * res.failing_fraction:.1f}%)",
             "  outcomes:"]
    lines += [f"    {n:7d}  {sig}" for sig, n in sorted(res.outcomes, key=lambda kv: -kv[1])]
    for tag, sched in res.damage:
        lines.append(f"  damage            {tag} (first seen after: {sched})")
    scope = "the whole schedule space" if res.space_covered else (
        "everything within the bound" if res.exhausted else "a part of the space (budget or stop)")
    lines.append(f"  covered           {scope}")
    for sig, f in res.first_by_signature:
        lines.append(f"  first {f.preemptions}-preemption failure: {f.schedule}\n      -> {sig}")
    if minimal is not None:
        tag = "minimal (shrunk)" if minimal.get("shrunk") else "shrink it with --shrink"
        lines.append(f"  {tag}: {minimal['schedule']}  ({minimal['steps']} steps, {minimal.get('switches')} "
                     f"switches) -> {minimal['assertion']} in {minimal['raised_in']}")
    lines.append(f"  time              {res.time_s:.2f} s ({res.rate:.0f} schedules/s)")
    return "\n".join(lines)


ARTEFACT_NAMES = ("schedule.txt", "minimal.yaml", "trace.json", "explore.json")  # plus test_minimal_<name>.py

# a random or PCT search of at least this many schedules runs in processes under ``--jobs auto`` (the default): a
# pool's start-up is then a small part of the wait (bench_explore.py --only parallel: 2.0x on two cores at rest)
AUTO_MIN_SCHEDULES = 2000


def auto_jobs(strategy: str, budget: int | None) -> int:
    """What ``--jobs auto`` (the default) runs in: one process per usable core where processes shorten the wait for
    a verdict, a random or PCT search of ``AUTO_MIN_SCHEDULES`` schedules or more on a machine with two or more usable
    cores, and one process elsewhere: a short search (the pool's start-up would outweigh it), an exhaustive one (its
    workers replay each prefix their round extends, which costs more than a second core gives back: 1.5-2x slower
    on two cores, measured in #41) and ``--reduce dpor`` (one process by design). Results never depend on it."""
    from ..cli_numbers import LIMITS, usable_cores

    cores = usable_cores()
    if cores < 2 or strategy == "exhaustive" or (1000 if budget is None else budget) < AUTO_MIN_SCHEDULES:
        return 1
    return min(cores, LIMITS["jobs"][1])


def _unified(preset) -> bool:
    from ..presets import UNIFIED, family_of

    return isinstance(preset, str) and family_of(preset) == UNIFIED


def _is_auto(text) -> bool:
    return isinstance(text, str) and text.strip().lower() == "auto"


def cli_explore(a) -> int:
    from ..cli_numbers import UsageError, whole
    from ..cli_numbers import jobs as parse_jobs
    from ..safe_io import check_folder, write_folder
    from .artefacts import artefact_texts, test_file_name
    from .shrink import shrink

    # everything is checked before any work and before anything is written
    bound, seed = whole("bound", a.bound), whole("seed", a.seed)
    budget = whole("budget", a.budget)
    jobs = auto_jobs(a.strategy, budget) if _is_auto(a.jobs) else parse_jobs(a.jobs)
    flags = dict(parse_flag(t) for t in a.flag or ())
    sc = load(a.scenario)
    if a.out is not None:
        try:
            check_folder(a.out, [*ARTEFACT_NAMES, test_file_name(sc)])
        except SimcacheError as e:
            raise UsageError(str(e)) from None
    if getattr(a, "confirm_real", None) is not None:  # a bad source fails before the search (the load is kept)
        if _unified(a.preset or sc.preset):
            from ..real.unified.confirm import loaded_unified

            loaded_unified(a.confirm_real, a.preset or sc.preset)
        else:
            from ..real.compare import loaded_for, parse_word

            loaded_for(*parse_word(a.confirm_real))
    reduce = getattr(a, "reduce", "state")
    if bound is None and a.strategy == "exhaustive" and reduce != "dpor":
        bound = DEFAULT_BOUND
    bar = progress_for(f"explore {sc.name}", getattr(a, "progress", False))
    try:
        res = explore(sc, a.preset, flags, a.strategy, bound, seed, budget, jobs, progress=bar, reduce=reduce)
    except ScenarioError as e:  # a conflict only some interleavings reach (two live requests with one id)
        msg = str(e)
        raise ScenarioError(msg if msg.startswith(sc.name) else f"{sc.name}: {msg}") from None
    finally:
        if bar is not None:
            bar.close()
    failure, minimal, texts, cases = pick_failure(res), None, {}, []
    if failure is not None:
        if a.shrink:
            sh = shrink(sc, res.preset, flags, failure.schedule)
            cases.append(("minimal (shrunk)", sh.scenario, sh.schedule, sh.signature))
            minimal = dict(sh.as_dict(), shrunk=True)
            if a.out:
                texts = artefact_texts(sh.scenario, sh.preset, sh.schedule)
        else:
            minimal = dict(schedule=failure.schedule, steps=failure.steps, assertion=failure.assertion,
                           raised_in=failure.raised_in, signature=failure.signature, switches=failure.switches,
                           preemptions=failure.preemptions, shrunk=False)
            if a.out:
                texts = artefact_texts(sc, res.preset, failure.schedule, flags)
    out = dict(res.as_dict(), minimal=minimal)
    confirmed = _confirm_real(a, sc, res, cases)
    if confirmed is not None:
        out["confirm_real"] = confirmed
    if a.out:
        files = {p.name: text for p, text in texts.values()}
        files["explore.json"] = json.dumps(out, indent=1) + "\n"
        try:
            written = write_folder(a.out, files)  # all or nothing, into a fresh folder moved into place
        except SimcacheError as e:
            raise UsageError(str(e)) from None
        kinds = {p.name: k for k, (p, _) in texts.items()}
        out["written"] = {kinds.get(name, "result"): str(p) for name, p in written.items()}
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(summary(res, minimal))
        if confirmed is not None:
            print(f"  on the real code, {confirmed['source']}:")
            print("\n".join(confirmed["lines"]) or "    no failure to replay")
        for k, v in out.get("written", {}).items():
            print(f"  wrote {k:9s} {v}")
    return 1 if confirmed is not None and confirmed["disagreements"] else 0  # a disagreement fails CI (docs/cli.md)


def _confirm_real(a, sc, res: ExploreResult, cases: list) -> dict | None:
    """``--confirm-real``: each failure reported (the shrunk one, then the first of each signature) replayed on
    SGLang's own code; a failure it does not reproduce is a disagreement, listed like the rest."""
    word = getattr(a, "confirm_real", None)
    if word is None:
        return None
    cases = cases + [(f"first failure with {sig}", sc, f.schedule, f.signature) for sig, f in res.first_by_signature]
    if _unified(res.preset):
        from ..real.unified.confirm import confirm_unified

        source, found = confirm_unified(cases, word, res.preset)
    else:
        from ..real.confirm import confirm

        source, found = confirm(cases, word)
    return dict(source=source, results=[c.as_dict() for c in found], lines=[c.line() for c in found],
                disagreements=sum(c.verdict != "confirmed" for c in found))
