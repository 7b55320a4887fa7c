"""The stale window as an animated GIF: two runs of one schedule, one above the other, from the moment a node goes
stale, through the step where the runs part, to the assertion (or the guard's clean-up) and the end.

This is the README's first picture (``assets/storyboard/stale-window.gif``, drawn by ``tools/make_assets.py``); the
storyboard command writes no GIF (a PR comment takes at most three still pictures, ``storyboard.py``).

Vocabulary
- The *stale window* runs from the first position (``render.moments.compare_positions``: both runs in lock-step)
  where a run has a node gone stale, to the last position (the end of the longer run).
- Its *frames*, in order: the went-stale position; each *moment* (a run's first went-stale, re-admission,
  clean-up, or its assertion: shown longer, named in a badge); the state after each operation while the node stays
  detached and held; the step before the runs part (``render.diverge``) and each step from the divergence until
  both runs have reached their moment; the end. Aim: ``MAX_FRAMES``; the operations between are thinned first
  (moments and the steps around the divergence are never dropped).
- Each frame: a title bar (the operation, a counter ``3 / 9``, what the moment is), one sentence per run (one for
  both while they do the same thing), then each run's tree under its label.
- *Stretches*: consecutive frames whose trees (both runs') are pinned to one layout of their union
  (``render.layout``): a box moves neither inside a stretch nor between the two runs. A stretch grows
  while its union still fits the width at ``MIN_SCALE`` or more (a union of the whole window is wider than any
  tree of it and would shrink the text below legible), so boxes move only where a stretch ends.

``stale_window`` is pure (the frames' words and DOT texts: ``tools/make_assets.py`` digests them); ``gif`` draws.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

from .render.diverge import divergence_point
from .render.frames import moment_words, op_text, tree_dot
from .render.moments import compare_positions
from .render.words import op_number, sentence
from .transcript import outcome_words

WIDTH = 720  # pixels: the README shows it at this width, so no browser scales it
DPI = 80  # Graphviz's, as the storyboard's
MAX_FRAMES = 16
MIN_SCALE = 0.88  # the least a tree is shrunk to fit the width
MS, KEY_MS, LAST_MS = 1600, 3200, 6000  # per frame: between moments, at a moment, the last frame


@dataclass(frozen=True)
class Frame:
    """One frame of the GIF: what it says and the DOT of each run's tree (before pinning)."""
    steps: tuple[int, ...]  # each run's micro-step
    title: str  # "op 5 · R6: request [1,2,7]"
    moment: str  # "went stale", "the runs part", "" ...
    lines: tuple[str, ...]  # one sentence per run, or one for both
    labels: tuple[str, ...]  # "pre_fix · step 122"
    dots: tuple[str, ...]
    ms: int


def _moments(run) -> dict[int, str]:
    """Micro-step -> the name of its moment, for the key moments of ``run``."""
    t, out = run.trace, {}
    for e in t.went_stale[:1]:
        out[e.step] = f"#{e.node} goes stale"
    for e in t.readmitted[:1]:
        out.setdefault(e.step, f"detached #{e.node} is re-admitted")
    for e in t.cleaned_up[:1]:
        out.setdefault(e.step, f"the guard cleans #{e.node} up")
    if run.crash is not None:
        out.setdefault(len(t.steps) - 1, "the assertion")
    return out


def _picks(runs, positions, ops) -> tuple[list[int], set[int]]:
    """The positions drawn (see the module doc) and those that are moments."""
    starts = [r.trace.went_stale[0].step for r in runs if r.trace.went_stale]
    i0 = next(i for i, r in enumerate(runs) if r.trace.went_stale)
    start = next(p for p, steps in enumerate(positions) if steps[i0] >= min(starts))
    last = len(positions) - 1
    marks = [_moments(r) for r in runs]
    keys = {p for p in range(start, last + 1)
            if any(positions[p][i] in m and (p == 0 or positions[p - 1][i] != positions[p][i])
                   for i, m in enumerate(marks))}
    d = divergence_point(*runs) if len(runs) == 2 else None
    close: set[int] = set()
    if d is not None and d.position >= start:
        keys.add(d.position)
        end = max([p for p in keys if p >= d.position], default=d.position)
        close = set(range(max(start, d.position - 1), end + 1))
    between = [p for p in range(start + 1, last) if ops[p] != ops[p + 1] and p not in close and p not in keys]
    room = MAX_FRAMES - len(keys | close | {start, last})
    if len(between) > max(room, 0):
        stride = -(-len(between) // max(room, 1))
        between = between[::stride][:max(room, 0)]
    return sorted(keys | close | {start, last} | set(between)), keys


def _said(run, step: int, shown: set[int]) -> str:
    """One sentence for ``run`` at ``step``; a run that ended earlier says how it ended."""
    t = run.trace
    if step in shown and step == len(t.steps) - 1:
        return f"{'raised' if run.crash else 'ended'} at step {step}: {outcome_words(run)}"
    if step == len(t.steps) - 1 and run.crash is None and t.steps[step].kind not in ("assertion", "cleaned_up"):
        return f"{sentence(t.steps[step])} It ends here: {outcome_words(run)}."
    return sentence(t.steps[step]) + moment_words(t, step)


def stale_window(run, compare=None) -> list[Frame]:
    """The frames of ``run``'s stale window (beside ``compare``, a run of the same schedule); ``[]`` when no node
    goes stale in either run."""
    from . import args

    args.traced_run(run, "stale_window")
    if compare is not None:
        args.traced_run(compare, "stale_window", "compare")
    runs = [run] + ([compare] if compare is not None else [])
    if not any(r.trace.went_stale for r in runs):
        return []
    traces = [r.trace for r in runs]
    positions, ops = compare_positions(traces)
    picks, keys = _picks(runs, positions, ops)
    d = divergence_point(*runs) if len(runs) == 2 else None
    marks = [_moments(r) for r in runs]
    frames, shown = [], [set() for _ in runs]
    for n, p in enumerate(picks, start=1):
        steps, k = positions[p], ops[p]
        t = next(t for t in traces if k < len(t.ops))
        said = [_said(r, s, shown[i]) for i, (r, s) in enumerate(zip(runs, steps, strict=True))]
        if len(runs) > 1 and len(set(said)) == 1 and len(set(steps)) == 1:
            lines = (f"Both runs: {said[0]}",)
        else:
            lines = tuple(f"{r.preset}: {w}" for r, w in zip(runs, said, strict=True))
        mine = [m[s] if s in m and s not in seen else None for m, s, seen in zip(marks, steps, shown, strict=True)]
        if len(set(mine)) == 1 and len(set(steps)) == 1:  # the same moment in both runs: said once
            named = [x for x in mine[:1] if x]
        else:
            named = [f"{r.preset}: {x}" if len(runs) > 1 else x for r, x in zip(runs, mine, strict=True) if x]
        if d is not None and d.position == p:
            named.insert(0, "the runs part")
        for seen, s in zip(shown, steps, strict=True):
            seen.add(s)
        frames.append(Frame(tuple(steps), f"op {op_number(t, k)} · {op_text(t, k)}", " · ".join(named),
                            lines, tuple(f"{r.preset} · step {s}" for r, s in zip(runs, steps, strict=True)),
                            tuple(tree_dot(r, s, legend=False) for r, s in zip(runs, steps, strict=True)),
                            LAST_MS if n == len(picks) else KEY_MS if p in keys else MS))
    return frames


def _rows(frame: Frame) -> list[str]:
    from PIL import Image, ImageDraw

    from .storyboard import _font, _wrap

    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    return [line for text in frame.lines for line in _wrap(probe, text, _font(14), WIDTH - 20)]


def _compose(frame: Frame, trees: list, index: int, count: int, head: int):
    """One frame's picture: the title bar (``head`` pixels high, the same in every frame so no tree moves down when a
    caption is longer), then each run's tree under its label."""
    from PIL import Image, ImageDraw

    from .storyboard import _font

    big, small, bold = _font(15, bold=True), _font(14), _font(16, bold=True)
    label_h, gap = 24, 10
    img = Image.new("RGB", (WIDTH, head + sum(t.height + label_h + gap for t in trees)), "white")
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, WIDTH, head - 4], fill="#f3f4f6")
    d.text((10, 9), frame.title, font=bold, fill="#111")
    counter = f"{index} / {count}"
    d.text((WIDTH - 10 - d.textlength(counter, font=small), 10), counter, font=small, fill="#6b7280")
    y = 36
    if frame.moment:
        d.rounded_rectangle([8, y - 2, 16 + d.textlength(frame.moment, font=big), y + 20], 4, fill="#b91c1c")
        d.text((12, y), frame.moment, font=big, fill="white")
    y += 24
    for line in _rows(frame):
        d.text((10, y), line, font=small, fill="#111")
        y += 19
    y = head
    for i, (tree, label) in enumerate(zip(trees, frame.labels, strict=True)):
        if i:
            d.line([(0, y - gap // 2), (WIDTH, y - gap // 2)], fill="#d1d5db", width=2)
        d.text((10, y + 2), label, font=big, fill="#1d4ed8")
        img.paste(tree, ((WIDTH - tree.width) // 2, y + label_h))
        y += tree.height + label_h + gap
    return img


def _fits(dots: list[str]) -> bool:
    from .render.layout import positions, union_dot

    union = union_dot(dots)
    return union is not None and positions(union)[1][0] * DPI / 72 * MIN_SCALE <= WIDTH - 16


def _stretches(dots: list[tuple[str, ...]]) -> list[list[str]]:
    """Each frame's DOTs (one per run), pinned stretch by stretch (see the module doc)."""
    from .render.layout import stable

    out: list[list[str]] = []
    i = 0
    while i < len(dots):
        j = i + 1
        while j < len(dots) and _fits([d for ds in dots[i:j + 1] for d in ds]):
            j += 1
        pinned, per = stable([d for ds in dots[i:j] for d in ds], splines=True), len(dots[i])
        out += [pinned[k * per:(k + 1) * per] for k in range(j - i)]
        i = j
    return out


def gif(frames: list[Frame]) -> bytes:
    """The GIF of ``frames`` (``WIDTH`` pixels wide; every tree pinned to one layout, see the module doc)."""
    from PIL import Image

    from .render.svg import render_png
    from .storyboard import _fit

    if not isinstance(frames, list) or not frames or not all(isinstance(f, Frame) for f in frames):
        raise ValueError("gif takes the frames stale_window returns (a non-empty list): no node goes stale in these "
                         "runs, or these are not its frames")
    head = 36 + 24 + 19 * max(len(_rows(f)) for f in frames) + 10
    pictures = []
    for n, (f, dots) in enumerate(zip(frames, _stretches([f.dots for f in frames]), strict=True)):
        trees = [_fit(Image.open(io.BytesIO(render_png(d, dpi=DPI))).convert("RGB"), WIDTH - 16) for d in dots]
        pictures.append(_compose(f, trees, n + 1, len(frames), head))
    h = max(p.height for p in pictures)
    canvas = []
    for p in pictures:
        c = Image.new("RGB", (WIDTH, h), "white")
        c.paste(p, (0, 0))
        canvas.append(c.convert("P", palette=Image.ADAPTIVE, colors=128))
    buf = io.BytesIO()
    canvas[0].save(buf, "GIF", save_all=True, append_images=canvas[1:], duration=[f.ms for f in frames], loop=0,
                   optimize=True)
    return buf.getvalue()
