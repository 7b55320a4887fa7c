"""``python -m simcache.real.unified``: run issue #39's prefetch-refill race on SGLang's own ``UnifiedRadixCache``.

Loading SGLang's files runs their code: they come only from a release wheel (fetched into simcache's cache folder and
checked against the index's sha256), a path you name, or a commit of a git mirror you name.
"""
from __future__ import annotations

import argparse
import sys

from ..source import SourceError
from . import RELEASES, TARGETS, load_unified
from .race import run_race

POLICIES = ("write_through", "write_back")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m simcache.real.unified",
        description="Run issue #39's race (a prefetch refill hung under a node that is not backed up, then "
                    "evict / evict_host / evict) on SGLang's own UnifiedRadixCache, version by version. Loading "
                    "SGLang's files runs their code: they come from a release wheel (downloaded once into "
                    "simcache's cache folder, sha256-checked), --sglang PATH, or --git MIRROR.",
        epilog=f"Covered versions: {', '.join(TARGETS)}. Exit status: 0 when every run ran (a cache that fails "
               f"is a result, printed), 2 for bad input.")
    p.add_argument("--sglang-version", action="append", metavar="X.Y.Z",
                   help="a release (repeat for several); its wheel (12-24 MB) is fetched once into the cache folder")
    p.add_argument("--all", action="store_true",
                   help=f"every covered release ({', '.join(RELEASES)}: about 110 MB of wheels on a first run)")
    p.add_argument("--sglang", metavar="PATH", help="a SGLang checkout or unpacked wheel (give --as VERSION too)")
    p.add_argument("--git", metavar="MIRROR", help="a git mirror of SGLang's history; runs the mirror commit")
    p.add_argument("--as", dest="as_version", metavar="VERSION",
                   help="with --sglang: which covered version's file layout the path has")
    p.add_argument("--policy", choices=(*POLICIES, "both"), default="both", help="the HiCache write policy")
    p.add_argument("-v", "--verbose", action="store_true", help="print the tree and pools after every step")
    a = p.parse_args(argv)
    policies = POLICIES if a.policy == "both" else (a.policy,)
    if a.sglang and not a.as_version:
        p.error("--sglang PATH needs --as VERSION (one of: " + ", ".join(TARGETS) + ")")
    if sum(map(bool, (a.sglang, a.git, a.sglang_version, a.all))) != 1:
        p.error("say which code to run, one of: --sglang-version X.Y.Z (repeatable), --all (every covered release, "
                "about 110 MB of wheels on a first run), --sglang PATH --as VERSION, or --git MIRROR")
    if a.sglang:
        runs = [(a.as_version, dict(path=a.sglang))]
    elif a.git:
        runs = [(next(iter(TARGETS)), dict(git_dir=a.git))]
    else:
        runs = [(v, {}) for v in (RELEASES if a.all else a.sglang_version)]
    for version, where in runs:
        try:
            loaded = load_unified(version, **where)
        except KeyError as e:
            print(f"simcache: {e.args[0]}", file=sys.stderr)
            return 2
        except SourceError as e:
            print(f"simcache: {e}", file=sys.stderr)
            return 2
        for policy in policies:
            result = run_race(loaded, policy)
            print(result.report(verbose=a.verbose))
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
