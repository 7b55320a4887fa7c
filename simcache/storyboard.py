"""A storyboard for a pull-request comment: ``comment.md`` (the outcome table first) and at most three pictures.

GitHub comments take images, not HTML; this writes what a reviewer pastes, then drags the pictures into.

Vocabulary
- ``comment.md`` opens with an HTML comment (it never shows once posted) saying how to post: paste the text, drag
  each picture file into the comment box (GitHub uploads it and inserts its own link; the line naming the file
  goes). Then the heading, the outcome table (each preset as run, ``--flag`` changes named, the outcome in the CLI's
  words: never "clean" beside damage or for a run narrowed by ``--ops``), the replay command (``shlex``-quoted,
  ``transcript.replay_command``), then the pictures, each with one caption line (the picture's own bar holds only
  a short title: no caption is said twice).
- The pictures, at most three, none repeated:
  1. ``1-divergence.png`` (with ``compare``, when the runs part): both trees side by side at the divergent step,
     each over its code at the guard line (``render/diverge.py``), the guard highlighted;
  2. ``2-went-stale.png``: the tree at the first went-stale step, with the box of everyone still holding the node;
     one tree when both runs are the same there (they share the schedule up to the divergence);
  3. ``3-end.png``: the last step (the assertion, or the end), side by side in a comparison.
- Every picture is ``WIDTH`` pixels wide (GitHub's comment column is about 880): a tree is drawn by Graphviz as PNG
  (the focus view for a large tree) at a dpi that keeps its text legible, shrunk only if wider, under a title bar
  (DejaVu Sans; code in DejaVu Sans Mono).

Pillow composes the pictures: it is already installed with matplotlib (a dependency), so the storyboard adds no
package; Graphviz ``dot -Tpng`` (``render.svg.render_png``) draws the trees.
"""
from __future__ import annotations

import io
import os
from pathlib import Path

from .codepane import code_at, flag_on
from .errors import ConfigError, FileError
from .game_levels import _cause, _holder, _join
from .render.diverge import divergence_point
from .render.frames import op_text, tree_dot
from .render.moments import compare_positions
from .render.svg import render_png
from .render.words import op_number, short
from .transcript import outcome_words, replay_command, run_label

WIDTH = 860  # pixels: a GitHub comment column
HALF = (WIDTH - 12) // 2  # one run of a side-by-side picture
MIN_SCALE = 0.8  # two trees go side by side only if neither shrinks more than this
DPI = 80  # Graphviz's; a tree of the gallery then needs no shrinking to fit
CODE_LINES = 4  # source lines either side of the guard in the divergence picture
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
MONO = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"


def _font(size: int, bold: bool = False, mono: bool = False):
    from PIL import ImageFont

    path = MONO if mono else BOLD if bold else FONT
    return ImageFont.truetype(path, size) if os.path.exists(path) else ImageFont.load_default(size=size)


def key_moments(run) -> list[tuple[int, str, str]]:
    """``(step, file stem, caption)`` for each key moment of ``run``, in step order."""
    t = run.trace
    out: list[tuple[int, str, str]] = []  # at one step, the first listed wins: went stale before a violation
    if t.went_stale:
        e = t.went_stale[0]
        out.append((e.step, "went-stale", short(f"node #{e.node} [{e.key}] went stale: detached {_cause(e.cause, 3)} "
                                                f"while {_join([_holder(h) for h in e.holders])} still held it")))
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
                else f"the end: {outcome_words(run)}"))
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
    """One row of the outcome table: the preset as run (with any ``--flag`` change), the outcome in the CLI's
    words (never "clean" beside damage or for a narrowed run), and how many nodes went stale and were cleaned up."""
    t = run.trace
    return f"| `{run_label(run)}` | {outcome_words(run)} | {len(t.went_stale)} | {len(t.cleaned_up)} |"


def storyboard_files(run, compare=None, header_note: str | None = None) -> dict[str, bytes | str]:
    """File name -> content of the storyboard of ``run`` (and ``compare`` beside it): see the module doc;
    ``header_note``: one more line under the outcome table (e.g. the real code's outcome, ``--against-real``)."""
    runs = [run] + ([compare] if compare is not None else [])
    traces = [r.trace for r in runs]
    if any(not t.steps for t in traces):
        raise ConfigError("this run has no micro-steps to draw; give it at least one operation")
    positions, ops = compare_positions(traces)
    files: dict[str, bytes | str] = {}
    shots: list[tuple[str, str]] = []  # (file, caption)
    if compare is not None:
        d = divergence_point(run, compare)
        if d is not None:
            files["1-divergence.png"] = _png(_divergence_picture(runs, d))
            shots.append(("1-divergence.png", _divergence_caption(runs, d)))
    stale = next(((i, r) for i, r in enumerate(runs) if r.trace.went_stale), None)
    if stale is not None:
        i, r = stale
        e = r.trace.went_stale[0]
        pos = next(p for p, steps in enumerate(positions) if steps[i] >= e.step)
        steps = positions[pos]
        same = len(runs) == 1 or _same_picture(runs, steps)
        shown = [r] if same else runs
        trees, side = _trees(shown, [e.step] if same else steps)
        title = f"{len(shots) + 1}. went stale · op {_op_number(traces, ops[pos])}: {_op_text(traces, ops[pos])}"
        labels = [f"{x.preset}: step {s}" for x, s in zip(shown, [e.step] if same else steps, strict=True)]
        files[f"{len(shots) + 1}-went-stale.png"] = _png(_panel(title, "", trees, labels if not same else [""], side))
        cap = next(c for st, stem, c in key_moments(r) if stem == "went-stale")
        shots.append((f"{len(shots) + 1}-went-stale.png",
                      cap + (" (the same in both runs: they share the schedule up to here)" if same and compare
                             else "")))
    last = [len(t.steps) - 1 for t in traces]
    trees, side = _trees(runs, last)
    title = f"{len(shots) + 1}. the end · op {_op_number(traces, ops[-1])}: {_op_text(traces, ops[-1])}"
    labels = [f"{x.preset}: {'raised' if x.crash else 'ended'} at step {s}" for x, s in zip(runs, last, strict=True)]
    files[f"{len(shots) + 1}-end.png"] = _png(_panel(title, "", trees, labels if len(runs) > 1 else [""], side))
    ends = [f"{x.preset} {'raises at' if x.crash else 'ends at'} step {len(x.trace.steps) - 1}" for x in runs]
    shots.append((f"{len(shots) + 1}-end.png", f"the last step: {'; '.join(ends)} (the outcomes are in the table)"))
    files["comment.md"] = _comment(runs, shots, header_note)
    return files


def _same_picture(runs, steps) -> bool:
    """Whether both runs draw the same tree at ``steps`` (then the picture shows it once)."""
    return len({tree_dot(r, s, legend=False) for r, s in zip(runs, steps, strict=True)}) == 1


def _divergence_caption(runs, d) -> str:
    a, b = runs
    where = f"operation {_op_number([r.trace for r in runs], d.op)}, steps {d.steps[0]} / {d.steps[1]}"
    if d.function is None:
        return f"the runs part at {where}; no line of a fix decides it there"
    on = [r.preset for r in runs if flag_on(r.flags, d.flag)]
    return (f"the runs part at {where}: `{d.function}` line {d.line}, the `{d.flag}` guard, is on in "
            f"{', '.join(on) or 'neither'} and off in {', '.join(r.preset for r in runs if r.preset not in on)}")


def _code_png(run, step: int, d, width: int):
    """The code of ``run`` at ``step`` around the guard line of ``d`` (or the current line): a few lines of the
    guard's function, the guard highlighted (green: on in this run; grey: off), the current line marked ▶."""
    from PIL import Image, ImageDraw

    frames = code_at(run.trace, step)
    f = next((x for x in reversed(frames) if x.function == d.function), frames[-1] if frames else None)
    mono, bold = _font(13, mono=True), _font(13, bold=True)
    if f is None:
        img = Image.new("RGB", (width, 30), "white")
        ImageDraw.Draw(img).text((8, 8), "(no simulated function runs here)", font=mono, fill="#6b7280")
        return img
    guard = d.line if f.function == d.function else None
    centre = guard if guard is not None else f.line
    lo, hi = max(f.first_line, centre - CODE_LINES), min(f.first_line + len(f.lines) - 1, centre + CODE_LINES)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    rows = []
    for ln in range(lo, hi + 1):
        text = f.lines[ln - f.first_line]
        indent = len(text) - len(text.lstrip())
        for k, piece in enumerate(_wrap(probe, text.strip(), mono, width - 70 - 7 * indent) or [""]):
            rows.append((ln if k == 0 else None, " " * indent + ("  " if k else "") + piece))
    top = 44 if guard is not None else 24
    h = top + 18 * len(rows) + 6
    img = Image.new("RGB", (width, h), "#f9fafb")
    dr = ImageDraw.Draw(img)
    dr.text((6, 4), f"{f.function}()  {f.path}:{f.line}", font=bold, fill="#111")
    on = d.flag is not None and flag_on(run.flags, d.flag)
    y = top
    for ln, text in rows:
        mark = ln == guard
        if mark:
            dr.rectangle([0, y - 1, width, y + 17], fill="#dcfce7" if on else "#e5e7eb")
            dr.rectangle([0, y - 1, 4, y + 17], fill="#16a34a" if on else "#6b7280")
        if ln == f.line:
            dr.rectangle([6, y - 1, width, y + 17], outline="#d97706", width=2)
        num = "" if ln is None else ("▶" if ln == f.line else "") + str(ln)
        dr.text((10, y), num.rjust(5), font=mono, fill="#6b7280")
        dr.text((60, y), text, font=mono, fill="#111")
        y += 18
    if guard is not None:
        tag = f"line {guard}: the {d.flag} guard, {'on' if on else 'off'} in {run.preset}"
        dr.text((6, 24), tag, font=mono, fill="#15803d" if on else "#4b5563")
    return img


def _divergence_picture(runs, d):
    """Both trees at the divergent step, side by side, each over its code at the guard."""
    from PIL import Image, ImageDraw

    trees, side = _trees(runs, list(d.steps))
    codes = [_code_png(r, s, d, HALF) for r, s in zip(runs, d.steps, strict=True)]
    title = f"1. the divergence · op {_op_number([r.trace for r in runs], d.op)}: " \
            f"{_op_text([r.trace for r in runs], d.op)}"
    top = _panel(title, "", trees, [f"{r.preset}: step {s}" for r, s in zip(runs, d.steps, strict=True)], side)
    ch = max(c.height for c in codes)
    img = Image.new("RGB", (WIDTH, top.height + ch + 8), "white")
    img.paste(top, (0, 0))
    for i, c in enumerate(codes):
        img.paste(c, (i * (WIDTH // 2) + 3, top.height + 4))
    ImageDraw.Draw(img).line([(WIDTH // 2, top.height), (WIDTH // 2, top.height + ch + 8)], fill="#d1d5db", width=2)
    return img


def _op_number(traces, k: int) -> int:
    """The real number of operation ``k`` (a run narrowed by ``--ops`` keeps the schedule's numbers)."""
    return op_number(next(t for t in traces if k < len(t.ops)), k)


def _op_text(traces, k: int) -> str:
    """Operation ``k`` in words, from the first run that reached it (a run that raised earlier has no op ``k``; the
    runs share their schedule, so the words are the same in each run that has it)."""
    return op_text(next(t for t in traces if k < len(t.ops)), k)


# the first line of comment.md: an HTML comment, so it never shows in the posted comment
HOW_TO_POST = ("<!-- simcache storyboard. To post it: paste this text into the GitHub comment box, then drag each "
               "picture file of this folder into the box; GitHub uploads it and inserts its own link: delete the "
               "line ![…](file.png) that names that file. -->")


def _comment(runs, shots, header_note: str | None = None) -> str:
    r = runs[0]
    what = " vs ".join(f"`{run_label(x)}`" for x in runs)
    cmds = [replay_command(x) for x in runs]
    replay = (f"Replay: {' and '.join(f'`{c}`' for c in cmds)}." if all(cmds) else
              "No command line reproduces it: the scenario was given as data in Python; save it to a file to "
              "replay it.")
    lines = [HOW_TO_POST, f"### simcache: `{r.scenario.name}` under {what}", "",
             "| preset | outcome | went stale | cleaned up |", "|---|---|---|---|",
             *[_outcome_row(x) for x in runs], ""]
    lines += [header_note, ""] if header_note else []  # e.g. the real code's outcome (--against-real)
    lines += [f"**Narrowed:** {x.narrowed}; no outcome above is the scenario's." for x in runs if x.narrowed]
    lines += [f"Schedule: `{r.schedule}`. {replay}", ""]
    for i, (name, cap) in enumerate(shots, start=1):
        lines += [f"**{i}.** {cap}", "", f"![{name[2:-4].replace('-', ' ')}]({name})", ""]
    lines += ["<sub>Boxes: blue = KV on device, amber = on host; red dashed = STALE (detached from the tree "
              "while something still holds it), grey dashed = detached, not stale; gold = new or changed.</sub>", ""]
    return "\n".join(lines)


def write_storyboard(run, path, compare=None, header_note: str | None = None) -> dict[str, Path]:
    """Write the storyboard of ``run`` into the folder ``path`` (safe_io's rules: all or nothing)."""
    from .safe_io import check_folder, write_folder

    try:
        check_folder(path, ["comment.md"], what="--storyboard")  # a bad folder fails before the drawing
        return write_folder(path, storyboard_files(run, compare, header_note), what="--storyboard")
    except FileError as e:
        raise ConfigError(str(e)) from None
