"""A storyboard for a pull-request comment: PNGs of a run's key moments, a GIF of its stale window, a comment.md.

GitHub comments take images, not HTML; this writes what a reviewer can drop into one.

Vocabulary
- A *key moment* is a micro-step worth a picture: the first invariant violation, the first went-stale, the first
  re-admission, the first clean-up, and the end (the assertion, or the last step when the cache survived); with
  ``compare`` the moments of both runs, each drawn for both runs side by side at the same position (lockstep:
  ``render.moments.compare_positions``).
- The *stale window* runs from the first went-stale step to the last position (the assertion, or the end of a run
  that survived; side by side, the end of the longer run): the GIF shows it one operation at a time.
- Every picture is ``WIDTH`` pixels wide (GitHub's comment column is about 880): a tree is drawn by Graphviz as PNG
  at a dpi that keeps its text legible, shrunk only if wider, and topped by a caption bar (DejaVu Sans).
- ``comment.md`` links the pictures in order, one caption line each, then the legend (``legend.png``, folded)
  and the outcome table.

Pillow composes the pictures and writes the GIF: it is already installed with matplotlib (a dependency), so the
storyboard adds no package; Graphviz ``dot -Tpng`` (``render.svg.render_png``) draws the trees.
"""
from __future__ import annotations

import io
import os
import shlex
from pathlib import Path

from .errors import ConfigError, FileError
from .game_levels import _cause, _holder, _join
from .render.dot import legend_dot
from .render.frames import op_text, tree_dot
from .render.moments import compare_positions
from .render.svg import render_png

WIDTH = 860  # pixels: a GitHub comment column
HALF = (WIDTH - 12) // 2  # one run of a side-by-side picture
MIN_SCALE = 0.8  # two trees go side by side only if neither shrinks more than this
DPI = 80  # Graphviz's; a tree of the gallery then needs no shrinking to fit
MAX_GIF_FRAMES = 40
GIF_MS = 1400  # per frame
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"


def _font(size: int, bold: bool = False):
    from PIL import ImageFont

    path = BOLD if bold else FONT
    return ImageFont.truetype(path, size) if os.path.exists(path) else ImageFont.load_default(size=size)


def key_moments(run) -> list[tuple[int, str, str]]:
    """``(step, file stem, caption)`` for each key moment of ``run``, in step order."""
    t = run.trace
    out: list[tuple[int, str, str]] = []  # at one step, the first listed wins: went stale before a violation
    if t.went_stale:
        e = t.went_stale[0]
        out.append((e.step, "went-stale", f"node #{e.node} [{e.key}] went stale: detached {_cause(e.cause, 3)} while "
                                          f"{_join([_holder(h) for h in e.holders])} still held it"))
    if t.violations:
        v = t.violations[0]
        out.append((v.step, "first-violation", f"first violation ({v.invariant.replace('_', ' ')}): {v.message}"))
    if t.readmitted:
        e = t.readmitted[0]
        out.append((e.step, "readmitted", f"node #{e.node} [{e.key}] re-admitted while detached: "
                                          f"{e.cause.removeprefix('detached node ')}"))
    if t.cleaned_up:
        e = t.cleaned_up[0]
        out.append((e.step, "cleaned-up", f"node #{e.node} [{e.key}] cleaned up by a guard: {e.reason}"))
    last = len(t.steps) - 1
    c = run.crash
    out.append((last, "assertion" if c else "end", f"the assertion: {c.type}: {c.message} (in {c.function})" if c
                else "the end: the cache survived"))
    seen, keep = set(), []
    for m in sorted(out, key=lambda m: m[0]):
        if m[0] not in seen and m[0] >= 0:
            seen.add(m[0])
            keep.append(m)
    return keep


def _fit(img, width: int):
    from PIL import Image

    if img.width > width:
        img = img.resize((width, round(img.height * width / img.width)), Image.LANCZOS)
    return img


def _tree_png(run, step: int):
    from PIL import Image

    return Image.open(io.BytesIO(render_png(tree_dot(run, step, legend=False), dpi=DPI))).convert("RGB")


def _trees(runs, steps) -> tuple[list, bool]:
    """The trees of ``runs`` at ``steps``, fitted; and whether they go side by side (else one above the other:
    two trees that would shrink below ``MIN_SCALE`` to share the column would be illegible)."""
    imgs = [_tree_png(r, s) for r, s in zip(runs, steps, strict=True)]
    if len(imgs) == 1 or max(i.width for i in imgs) * MIN_SCALE <= HALF:
        return [_fit(i, HALF if len(imgs) > 1 else WIDTH - 24) for i in imgs], True
    return [_fit(i, WIDTH - 24) for i in imgs], False


def _wrap(draw, text: str, font, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        test = f"{line} {word}".strip()
        if draw.textlength(test, font=font) <= width or not line:
            line = test
        else:
            lines.append(line)
            line = word
    return lines + ([line] if line else [])


def _panel(title: str, caption: str, trees: list, labels: list[str], side: bool = True):
    """One picture: a caption bar over the trees (one; or two with their labels, side by side or stacked)."""
    from PIL import Image, ImageDraw

    big, small, bold = _font(17), _font(15), _font(17, bold=True)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    lines = _wrap(probe, caption, small, WIDTH - 24)
    head = 12 + 24 + 20 * len(lines) + 10
    label_h = 26 if len(trees) > 1 else 0
    body = max(t.height for t in trees) + label_h if side else sum(t.height + label_h for t in trees)
    img = Image.new("RGB", (WIDTH, head + body + 10), "white")
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, WIDTH, head - 4], fill="#f3f4f6")
    d.text((12, 10), title, font=bold, fill="#111")
    for i, line in enumerate(lines):
        d.text((12, 36 + 20 * i), line, font=small, fill="#222")
    if not side:
        y = head
        for i, (tree, label) in enumerate(zip(trees, labels, strict=True)):
            if i:
                d.line([(0, y - 2), (WIDTH, y - 2)], fill="#d1d5db", width=2)
            d.text((12, y), label, font=big, fill="#1d4ed8")
            img.paste(tree, ((WIDTH - tree.width) // 2, y + label_h))
            y += tree.height + label_h
        return img
    col = WIDTH // len(trees)
    for i, (tree, label) in enumerate(zip(trees, labels, strict=True)):
        x = i * col + (col - tree.width) // 2
        if label_h:
            d.text((i * col + 12, head), label, font=big, fill="#1d4ed8")
        img.paste(tree, (x, head + label_h))
    if len(trees) > 1:
        d.line([(col, head), (col, head + body)], fill="#d1d5db", width=2)
    return img


def _png(img) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "PNG", optimize=True)
    return buf.getvalue()


def _outcome_row(run) -> str:
    t, r = run.trace, run.to_json()
    c = run.crash
    what = f"`{c.type}: {c.message}` in `{c.function}`" if c else "clean"
    dfree = ", ".join(f"{p}: {a['double_freed']}" for p, a in r["pools"].items() if a["double_freed"]) or "none"
    leak = ", ".join(f"{p}: {a['leaked']}" for p, a in r["pools"].items() if a["leaked"]) or "none"
    return f"| `{run.preset}` | {what} | {len(t.went_stale)} | {len(t.cleaned_up)} | {dfree} | {leak} |"


def storyboard_files(run, compare=None, header_note: str | None = None) -> dict[str, bytes | str]:
    """File name -> content of the storyboard of ``run`` (and ``compare`` beside it)."""
    runs = [run] + ([compare] if compare is not None else [])
    traces = [r.trace for r in runs]
    if any(not t.steps for t in traces):
        raise ConfigError("this run has no micro-steps to draw; give it at least one operation")
    positions, ops = compare_positions(traces)
    files: dict[str, bytes | str] = {}
    shots: list[tuple[str, str]] = []
    moments = []  # (position, stem, preset, caption)
    for i, r in enumerate(runs):
        for step, stem, cap in key_moments(r):
            pos = next(p for p, steps in enumerate(positions) if steps[i] >= step)
            moments.append((pos, stem, r.preset, cap))
    grouped: dict[int, list] = {}  # position -> its moments: one picture each
    for m in sorted(moments, key=lambda m: m[0]):
        grouped.setdefault(m[0], []).append(m)
    for pos, group in sorted(grouped.items()):
        stem = group[0][1]
        if compare is None:
            cap = group[0][3]
        elif len(group) == len(runs) and len({m[3] for m in group}) == 1:  # the same in both runs: say it once
            cap = f"{' and '.join(m[2] for m in group)}: {group[0][3]}"
        else:
            cap = " | ".join(f"{m[2]}: {m[3]}" for m in group)
        steps, k = positions[pos], ops[pos]
        title = f"{len(shots) + 1}. op {k}: {_op_text(traces, k)}" + \
            ("" if compare is not None else f" · step {steps[0]}")
        trees, side = _trees(runs, steps)
        img = _panel(title, cap, trees,
                     [f"{r.preset}: {'raised' if r.crash and s == len(r.trace.steps) - 1 else 'step ' + str(s)}"
                      for r, s in zip(runs, steps, strict=True)], side)
        name = f"{len(shots) + 1:02d}-{stem}.png"
        files[name] = _png(img)
        shots.append((name, cap))
    gif = _stale_gif(runs, positions, ops)
    if gif is not None:
        files["stale-window.gif"] = gif
    files["legend.png"] = render_png(legend_dot(), dpi=DPI)
    files["comment.md"] = _comment(runs, shots, gif is not None, header_note)
    return files


def _op_text(traces, k: int) -> str:
    """Operation ``k`` in words, from the first run that reached it (a run that raised earlier has no op ``k``; the
    runs share their schedule, so the words are the same in each run that has it)."""
    return op_text(next(t for t in traces if k < len(t.ops)), k)


def _stale_gif(runs, positions, ops) -> bytes | None:
    from PIL import Image

    stale = [r.trace.went_stale[0].step for r in runs if r.trace.went_stale]
    if not stale:
        return None
    i0 = next(i for i, r in enumerate(runs) if r.trace.went_stale)
    start = next(p for p, steps in enumerate(positions) if steps[i0] >= min(stale))
    end_pos = len(positions) - 1
    # one frame at the start, then one at the last step of each operation inside the window
    picks = [start]
    for p in range(start + 1, end_pos + 1):
        if ops[p] != ops[p - 1] or p == end_pos:
            picks.append(p - 1 if p != end_pos else p)
    picks = sorted(set(picks))
    if len(picks) > MAX_GIF_FRAMES:
        stride = -(-len(picks) // MAX_GIF_FRAMES)
        picks = sorted(set(picks[::stride] + [picks[-1]]))
    frames = []
    for p in picks:
        steps, k = positions[p], ops[p]
        cap = "; ".join(f"{r.preset}: step {s}, {r.trace.steps[s].text}" for r, s in zip(runs, steps, strict=True))
        title = f"stale window · op {k}: {_op_text([r.trace for r in runs], k)}"
        trees, side = _trees(runs, steps)
        frames.append(_panel(title, cap, trees, [f"{r.preset}: step {s}" for r, s in zip(runs, steps, strict=True)],
                             side))
    h = max(f.height for f in frames)
    canvas = []
    for f in frames:
        c = Image.new("RGB", (WIDTH, h), "white")
        c.paste(f, (0, 0))
        canvas.append(c.convert("P", palette=Image.ADAPTIVE, colors=128))
    buf = io.BytesIO()
    canvas[0].save(buf, "GIF", save_all=True, append_images=canvas[1:], duration=GIF_MS, loop=0, optimize=True)
    return buf.getvalue()


def _comment(runs, shots, gif: bool, header_note: str | None = None) -> str:
    r = runs[0]
    what = " vs ".join(f"`{x.preset}`" for x in runs)
    lines = [f"### simcache: `{r.scenario.name}` under {what}", "",
             f"Schedule: `{r.schedule}` (replay: `python -m simcache run {r.scenario.name} --preset {r.preset}"
             f"{' --schedule ' + shlex.quote(str(r.schedule)) if str(r.schedule) else ''}`"
             + (f"; the same with `--preset {runs[1].preset}`" if len(runs) > 1 else "") + ").", ""]
    if header_note:  # one more header line, e.g. the real code's outcome (--against-real)
        lines += [header_note, ""]
    for i, (name, cap) in enumerate(shots, start=1):
        lines += [f"**{i}.** {cap}", "", f"![{i}. {name[3:-4].replace('-', ' ')}]({name})", ""]
    if gif:
        lines += ["**The stale window**, one operation per frame:", "", "![the stale window](stale-window.gif)", ""]
    lines += ["<details><summary>legend</summary>", "", "![legend](legend.png)", "", "</details>", ""]
    lines += ["| preset | outcome | went stale | cleaned up | double-freed slots | leaked slots |",
              "|---|---|---|---|---|---|", *[_outcome_row(x) for x in runs], "",
              "<sub>Drawn by simcache (`simcache export SCENARIO --storyboard DIR`). Drag the images into the comment "
              "box; GitHub uploads them and rewrites the links.</sub>", ""]
    return "\n".join(lines)


def write_storyboard(run, path, compare=None, header_note: str | None = None) -> dict[str, Path]:
    """Write the storyboard of ``run`` into the folder ``path`` (safe_io's rules: all or nothing)."""
    from .safe_io import check_folder, write_folder

    try:
        check_folder(path, ["comment.md"], what="--storyboard")  # a bad folder fails before the drawing
        return write_folder(path, storyboard_files(run, compare, header_note), what="--storyboard")
    except FileError as e:
        raise ConfigError(str(e)) from None
