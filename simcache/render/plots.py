"""matplotlib figures (drawn with Agg; no display, no pyplot): pool occupancy, crash rate vs host pressure,
exploration stats.

Vocabulary
- *Occupancy* of a pool at a micro-step is its used slots over its size, from the step's snapshot; leaked slots
  are drawn as a shaded band on top, and the moments (went stale, assertion) as vertical lines.
- *Host pressure* is whatever the workload explorer varies (e.g. requested host KV over host pool size); the crash
  rate is the fraction of its runs that reached the assertion. Rows come in as ``{preset, pressure, crash_rate}``.
- *Exploration stats* are counts (schedules run, distinct end states, failing ...), flat or per preset.

Each function returns a ``matplotlib.figure.Figure`` (never shows it); ``to_png`` turns one into bytes.
"""
from __future__ import annotations

import io

from matplotlib.figure import Figure  # a bare Figure draws with Agg and leaves pyplot's backend alone

from ..crash import STALE
from .moments import moments

COLORS = {"device_kv": "#1d4ed8", "device_mamba": "#7c3aed", "host_kv": "#b45309", "host_mamba": "#db2777"}
MOMENT_STYLE = {"went-stale": ("#dc2626", "--"), "cleaned-up": ("#16a34a", "--"), "assertion": ("#7f1d1d", "-")}


def pool_occupancy(trace, *, title: str = "Pool occupancy") -> Figure:
    """Used fraction of every pool per micro-step, leaks shaded, moments marked."""
    fig = Figure(figsize=(10, 3.8), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    snaps = trace.snapshots
    xs = list(range(len(snaps)))
    names = list(snaps[0].pools) if snaps else []
    # inside an operation slots are briefly in transit; a leak counts once it survives an operation's end
    ends = sorted(o.last_step for o in trace.ops if 0 <= o.last_step < len(snaps))
    boundary = [max((e for e in ends if e <= i), default=None) for i in xs]
    for name in names:
        size = max(1, snaps[0].pools[name].size)
        used = [len(s.pools[name].used) / size for s in snaps]
        leaked = [0 if b is None else len(set(s.pools[name].leaked) & set(snaps[b].pools[name].leaked)) / size
                  for s, b in zip(snaps, boundary, strict=True)]
        color = COLORS.get(name)
        ax.step(xs, used, where="post", label=f"{name} ({snaps[0].pools[name].size} slots)", color=color, lw=2)
        if any(leaked):
            ax.fill_between(xs, [u - lk for u, lk in zip(used, leaked, strict=True)], used, step="post", color=color,
                            alpha=0.3, hatch="//", label=f"{name} leaked")
    for kind, (color, style) in MOMENT_STYLE.items():
        for i, s in enumerate(moments(trace)[kind]):
            ax.axvline(s, color=color, ls=style, lw=1.5, label=kind if i == 0 else None)
    for op in trace.ops:
        ax.axvline(op.first_step, color="#e5e7eb", lw=0.8, zorder=0)
    ax.set_xlim(0, max(1, len(xs) - 1))
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("micro-step (grey lines: operation boundaries)")
    ax.set_ylabel("used / size")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, framealpha=0.9)
    fig.tight_layout()
    return fig


RATE_LABELS = {"crash_rate": "fraction of runs raising\nany assertion",  # two lines: one ran past a 4-inch axis
               "race_rate": f"fraction of runs reaching\n{STALE}",
               "damage_rate": "fraction of runs leaving\na double free or a leak"}


def crash_rate_vs_pressure(rows: list[dict], *, title: str = "Crash rate vs host pressure",
                           field: str = "crash_rate") -> Figure:
    """One line per preset through ``(pressure, rows[field])`` points; the y axis is labelled with what ``field``
    counts (``crash_rate``: any assertion; ``race_rate``: the stale-node assertion only) and fits the data."""
    if field not in RATE_LABELS:
        raise ValueError(f"unknown rate {field!r}; choose one of {', '.join(RATE_LABELS)}")
    fig = Figure(figsize=(7, 4), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    top = 0.0
    for i, preset in enumerate(presets):
        pts = sorted((float(r["pressure"]), float(r[field])) for r in rows if r["preset"] == preset)
        top = max([top] + [c for _, c in pts])
        ax.plot([p for p, _ in pts], [c for _, c in pts], marker="os^Dv"[i % 5], lw=2, label=preset)
    ax.set_ylim(-0.02 * max(top, 0.05), max(top, 0.05) * 1.15)  # fit the data: 0.25 is not drawn on a 0-1 axis
    ax.set_xlabel("host pressure")
    ax.set_ylabel(RATE_LABELS[field])
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if presets:
        ax.legend()
    fig.tight_layout()
    return fig


def exploration_stats(stats: dict, *, title: str = "Exploration") -> Figure:
    """Bars of counts: ``{name: n}``, or grouped ``{group: {name: n}}`` (e.g. one group per preset)."""
    fig = Figure(figsize=(7, 4), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    grouped = {k: v for k, v in stats.items() if isinstance(v, dict)}
    if grouped:
        names = list(dict.fromkeys(n for g in grouped.values() for n in g))
        width = 0.8 / max(1, len(grouped))
        for i, (group, counts) in enumerate(grouped.items()):
            xs = [j + i * width for j in range(len(names))]
            bars = ax.bar(xs, [counts.get(n, 0) for n in names], width, label=group)
            ax.bar_label(bars, fontsize=8)
        ax.set_xticks([j + width * (len(grouped) - 1) / 2 for j in range(len(names))], names)
        ax.legend()
    else:
        names = [k for k, v in stats.items() if isinstance(v, (int, float))]
        bars = ax.bar(names, [stats[n] for n in names], color="#60a5fa")
        ax.bar_label(bars, fontsize=9)
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    return fig


def to_png(fig: Figure, dpi: int = 100) -> bytes:
    """PNG bytes of ``fig``."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
