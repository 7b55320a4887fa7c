"""``python -m simcache``: Ctrl-C while the heavy modules load still ends with one sentence and status 130."""
import sys

try:
    from .cli import main
except KeyboardInterrupt:
    print("simcache: interrupted (Ctrl-C); nothing was written", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
