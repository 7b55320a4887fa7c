"""The storyboard's pictures compared pixel for pixel: a panel's caption bar, title, caption lines, labels, trees and
separators at the coordinates the layout promises (drawn here from those numbers, with stand-in trees of one
colour each); how trees are fitted and placed; the fonts; the caption wrapping; the panels the storyboard asks for
on crash_pr (at most three) and the divergence picture's code at the guard."""
from __future__ import annotations

import io
import os
from types import SimpleNamespace

import pytest
from PIL import Image, ImageChops, ImageDraw, ImageFont

from simcache import simulate
from simcache import storyboard as sb
from simcache.render.frames import tree_dot
from tests.spies import record_calls

DEJAVU = "/usr/share/fonts/truetype/dejavu/"


def font(size: int, bold: bool = False):
    path = DEJAVU + ("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")
    return ImageFont.truetype(path, size) if os.path.exists(path) else ImageFont.load_default(size=size)


def tree(w: int, h: int, colour: str):
    return Image.new("RGB", (w, h), colour)


def same(a, b) -> bool:
    return a.mode == b.mode and a.size == b.size and ImageChops.difference(a, b).getbbox() is None


def canvas(height: int, title: str, lines: list[str]):
    """860 px wide, white; the caption bar (rows 0..head-4) holds the title and the caption lines."""
    img = Image.new("RGB", (860, height), (255, 255, 255))
    d = ImageDraw.Draw(img)
    head = 12 + 24 + 20 * len(lines) + 10
    d.rectangle([0, 0, 860, head - 4], fill=(0xF3, 0xF4, 0xF6))
    d.text((12, 10), title, font=font(17, bold=True), fill=(0x11, 0x11, 0x11))
    for i, line in enumerate(lines):
        d.text((12, 36 + 20 * i), line, font=font(15), fill=(0x22, 0x22, 0x22))
    return img, d


BLUE, GREY = (0x1D, 0x4E, 0xD8), (0xD1, 0xD5, 0xDB)
LONG = ("node #7 [1,2] went stale: detached by _delete_tombstone_leaf, called from _iteratively_delete_tombstone_leaf"
        " <- _evict_host_leaf <- evict_host while ongoing_backup still held it")
LONG_LINES = ["node #7 [1,2] went stale: detached by _delete_tombstone_leaf, called from "
              "_iteratively_delete_tombstone_leaf", "<- _evict_host_leaf <- evict_host while ongoing_backup still held "
              "it"]


def test_one_tree_under_a_one_line_caption():
    got = sb._panel("1. op 3: request", "short caption", [tree(300, 200, "red")], [""])
    # head = 12 + 24 + 20 + 10 = 66; the tree centred at x = (860 - 300) // 2, right under the bar; 10 px below
    want, _ = canvas(66 + 200 + 10, "1. op 3: request", ["short caption"])
    want.paste(tree(300, 200, "red"), (280, 66))
    assert same(got, want)


def test_two_trees_side_by_side_under_a_two_line_caption():
    assert sb._wrap(ImageDraw.Draw(Image.new("RGB", (1, 1))), LONG, font(15), 836) == LONG_LINES
    got = sb._panel("2. op 5: evict", LONG, [tree(200, 150, "blue"), tree(300, 100, "green")],
                    ["left: pre_fix", "right: followup_fix"])
    # head = 86; a 26 px label row, then the trees centred in their 430 px columns; a grey rule between them
    want, d = canvas(86 + 150 + 26 + 10, "2. op 5: evict", LONG_LINES)
    d.text((12, 86), "left: pre_fix", font=font(17), fill=BLUE)
    want.paste(tree(200, 150, "blue"), (115, 112))
    d.text((442, 86), "right: followup_fix", font=font(17), fill=BLUE)
    want.paste(tree(300, 100, "green"), (495, 112))
    d.line([(430, 86), (430, 86 + 176)], fill=GREY, width=2)
    assert same(got, want)


def test_two_trees_stacked():
    got = sb._panel("3. op 9: events", "why", [tree(700, 120, "purple"), tree(836, 90, "orange")],
                    ["left: pre_fix", "right: described_fix"], side=False)
    # each tree under its label, centred; a grey rule above the second label
    want, d = canvas(66 + (120 + 26) + (90 + 26) + 10, "3. op 9: events", ["why"])
    d.text((12, 66), "left: pre_fix", font=font(17), fill=BLUE)
    want.paste(tree(700, 120, "purple"), (80, 92))
    d.line([(0, 210), (860, 210)], fill=GREY, width=2)
    d.text((12, 212), "right: described_fix", font=font(17), fill=BLUE)
    want.paste(tree(836, 90, "orange"), (12, 238))
    assert same(got, want)


def test_fonts(monkeypatch):
    regular, bold = sb._font(15), sb._font(17, bold=True)
    assert (regular.path, regular.size, bold.path, bold.size) == (sb.FONT, 15, sb.BOLD, 17)
    assert (regular.getname(), bold.getname()) == (("DejaVu Sans", "Book"), ("DejaVu Sans", "Bold"))
    assert sb._font(12).path == sb.FONT
    pillows = ImageFont.load_default(size=21).getname()  # Pillow's own font
    assert pillows[0] != "DejaVu Sans"
    monkeypatch.setattr(sb, "FONT", "/nonexistent/font.ttf")
    monkeypatch.setattr(sb, "BOLD", "/nonexistent/bold.ttf")
    for fallback in (sb._font(21), sb._font(21, bold=True)):  # a missing font file: Pillow's, at the size asked
        assert (fallback.getname(), fallback.size) == (pillows, 21)


class Ruler:
    """A stand-in for ImageDraw: every character is 10 px wide; it checks that the font asked for is passed on."""

    def __init__(self, font) -> None:
        self.font = font

    def textlength(self, text: str, font=None) -> float:
        assert font is self.font
        return 10.0 * len(text)


def test_wrap():
    f = object()
    r = Ruler(f)
    assert sb._wrap(r, "aaa bbb ccc", f, 70) == ["aaa bbb", "ccc"]  # "aaa bbb" is exactly 70 px: it fits
    assert sb._wrap(r, "aaa bbb ccc", f, 69) == ["aaa", "bbb", "ccc"]
    assert sb._wrap(r, "aaaaaaaaaaaa b", f, 50) == ["aaaaaaaaaaaa", "b"]  # a word wider than the line keeps its own
    assert sb._wrap(r, "  one   two  ", f, 1000) == ["one two"]
    assert sb._wrap(r, "", f, 100) == [] and sb._wrap(r, "   ", f, 100) == []


def test_fit():
    img = Image.effect_mandelbrot((400, 300), (-2, -1.5, 1, 1.5), 60).convert("RGB")
    assert sb._fit(img, 400) is img and sb._fit(img, 401) is img
    small = sb._fit(img, 200)
    assert small.size == (200, 150) and same(small, img.resize((200, 150), Image.LANCZOS))
    assert not same(small, img.resize((200, 150)))  # Lanczos, not Pillow's default filter
    assert sb._fit(img, 300).size == (300, 225) and sb._fit(img, 299).size == (299, 224)  # 224.25 rounds down


def test_png_is_the_picture_compressed_hard():
    img = sb._panel("1. op 3: request", "short caption", [tree(300, 200, "red")], [""])
    data = sb._png(img)
    back = Image.open(io.BytesIO(data))
    assert back.format == "PNG" and same(back.convert("RGB"), img)
    plain = io.BytesIO()
    img.save(plain, "PNG")
    assert len(data) < len(plain.getvalue())  # optimize=True: the smaller file for a panel (mostly flat colour)


def test_tree_png_draws_the_tree_without_its_legend_at_80_dpi(monkeypatch):
    run = simulate("scenario_a", "pre_fix")
    calls = record_calls(monkeypatch, sb, "render_png")
    img = sb._tree_png(run, 22)
    assert calls == [((tree_dot(run, 22, legend=False),), {"dpi": 80})]
    assert img.mode == "RGB" and img.size == Image.open(io.BytesIO(sb.render_png(tree_dot(run, 22, legend=False),
                                                                                   dpi=80))).size


@pytest.mark.parametrize("widths, side, fitted", [
    ((900,), True, [(836, 93)]),                  # one tree: the whole column less the margins
    ((836,), True, [(836, 100)]),
    ((400, 530), True, [(400, 100), (424, 80)]),  # 530 * 0.8 = 424 = half a column: side by side, the wider shrunk
    ((531, 200), False, [(531, 100), (200, 100)]),  # 531 * 0.8 > 424: one above the other, unshrunk
    ((900, 200), False, [(836, 93), (200, 100)]),
])
def test_trees_side_by_side_or_stacked(monkeypatch, widths, side, fitted):
    made, asked = iter([tree(w, 100, "red") for w in widths]), []
    monkeypatch.setattr(sb, "_tree_png", lambda run, step: asked.append((run, step)) or next(made))
    runs, steps = ["run a", "run b"][: len(widths)], [3, 7][: len(widths)]
    imgs, got_side = sb._trees(runs, steps)
    assert got_side is side and [i.size for i in imgs] == fitted
    assert asked == list(zip(runs, steps, strict=True))


@pytest.fixture(scope="module")
def crash_runs():
    return simulate("crash_pr", "pre_fix"), simulate("crash_pr", "described_fix")


def panels_asked(monkeypatch, heights=None):
    """Replace ``_trees`` and ``_panel``: each panel a one-colour picture (its number in the red channel), with the
    height ``heights`` gives; returns the list of (title, caption, labels, side) asked for."""
    asked = []

    def panel(title, caption, trees, labels, side=True):
        asked.append((title, caption, labels, side))
        n = len(asked)
        return Image.new("RGB", (860, heights(n) if heights else 100), (n, 40, 90))

    monkeypatch.setattr(sb, "_trees", lambda runs, steps: ([tree(10, 10, "red")] * len(runs), len(runs) == 1))
    monkeypatch.setattr(sb, "_panel", panel)
    return asked


def test_an_operation_only_the_second_run_reached_is_named_from_it(monkeypatch):
    # scenario C's first run raises at op 7 of this schedule; the fixed one goes on to op 9
    s = "pf R2 pf R4 mem R6 ctl mem ctl*2"
    a, b = simulate("scenario_c", "pre_fix", schedule=s), simulate("scenario_c", "described_fix", schedule=s)
    assert (len(a.trace.ops), len(b.trace.ops)) == (8, 10)
    asked = panels_asked(monkeypatch)
    sb.storyboard_files(a, b)
    assert asked[-1][0] == "3. the end · op 9: ctl: l3_ack"


def test_the_panels_a_storyboard_asks_for(monkeypatch, crash_runs):
    asked = panels_asked(monkeypatch)
    files = sb.storyboard_files(crash_runs[0])
    # one run: the went-stale holders and the end; no caption inside a picture (the comment says it, once)
    assert [(a[0], a[1], a[2]) for a in asked] == [
        ("1. went stale · op 5: R6: request [1,2,7]", "", [""]),
        ("2. the end · op 11: R7: request [8,8,8]", "", [""])]
    assert sorted(files) == ["1-went-stale.png", "2-end.png", "comment.md"]
    assert Image.open(io.BytesIO(files["1-went-stale.png"])).getpixel((0, 0)) == (1, 40, 90)


def test_the_panels_of_a_comparison(monkeypatch, crash_runs):
    asked = panels_asked(monkeypatch)
    files = sb.storyboard_files(*crash_runs)
    # the divergence (both trees, over their code), the went-stale tree once (the runs agree there), the two ends
    assert [(a[0], a[2]) for a in asked] == [
        ("1. the divergence · op 11: R7: request [8,8,8]", ["pre_fix: step 261", "described_fix: step 261"]),
        ("2. went stale · op 5: R6: request [1,2,7]", [""]),
        ("3. the end · op 11: R7: request [8,8,8]",
         ["pre_fix: raised at step 262", "described_fix: ended at step 271"])]
    assert sorted(files) == ["1-divergence.png", "2-went-stale.png", "3-end.png", "comment.md"]


def test_a_replay_line_without_a_schedule():
    run = simulate("scenario_d", "pre_fix", schedule="")  # the initial state's steps only
    assert str(run.schedule) == "" and run.trace.steps
    line = next(x for x in sb._comment([run], []).splitlines() if x.startswith("Schedule:"))
    assert line == "Schedule: ``. Replay: `python -m simcache run scenario_d --preset pre_fix --schedule ''`."


def test_a_one_step_run_has_its_end_at_step_0():
    trace = SimpleNamespace(went_stale=[], violations=[], readmitted=[], cleaned_up=[], steps=["one"])
    run = SimpleNamespace(trace=trace, crash=None, window=None, narrowed=None,
                          result={"double_frees": [], "accounting": {}})
    assert sb.key_moments(run) == [(0, "end", "the end: no assertion; no damage")]
    trace.steps = []
    assert sb.key_moments(run) == []  # (no step -1)


def test_write_storyboard_refuses_a_bad_folder_before_drawing(monkeypatch, tmp_path, crash_runs):
    drawn = []
    monkeypatch.setattr(sb, "storyboard_files", lambda *a: drawn.append(a) or {})
    (tmp_path / "f").write_text("x")
    with pytest.raises(sb.ConfigError) as e:
        sb.write_storyboard(crash_runs[0], tmp_path / "f")
    assert str(e.value) == f"--storyboard {tmp_path / 'f'} is a file, not a folder; choose another folder"
    (tmp_path / "d" / "comment.md").mkdir(parents=True)
    with pytest.raises(sb.ConfigError) as e:
        sb.write_storyboard(crash_runs[0], tmp_path / "d")
    assert str(e.value) == f"{tmp_path / 'd'} holds a folder named comment.md where a file goes; choose another " \
                           "--storyboard"
    assert drawn == []


def test_write_storyboard_writes_the_comparison_or_says_which_file_cannot_go(monkeypatch, tmp_path, crash_runs):
    panels_asked(monkeypatch)
    written = sb.write_storyboard(crash_runs[0], tmp_path / "sb", compare=crash_runs[1])
    assert sorted(written) == ["1-divergence.png", "2-went-stale.png", "3-end.png", "comment.md"]
    assert "under `pre_fix` vs `described_fix`" in written["comment.md"].read_text()
    (tmp_path / "in_the_way" / "1-went-stale.png").mkdir(parents=True)  # only the drawing names it
    with pytest.raises(sb.ConfigError) as e:
        sb.write_storyboard(crash_runs[0], tmp_path / "in_the_way")
    assert str(e.value) == f"{tmp_path / 'in_the_way'} holds a folder named 1-went-stale.png where a file goes; " \
                           "choose another --storyboard"
    assert sorted(p.name for p in (tmp_path / "in_the_way").iterdir()) == ["1-went-stale.png"]


def test_a_caption_line_just_under_the_column_stays_one_line():
    caption = "x" * 71 + " " + "i" * 48  # 835.14 px in DejaVu Sans 15: fits 836, not 835
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    assert 835 < probe.textlength(caption, font=font(15)) <= 836
    got = sb._panel("t", caption, [tree(100, 50, "red")], [""])
    want, _ = canvas(66 + 50 + 10, "t", [caption])
    want.paste(tree(100, 50, "red"), (380, 66))
    assert same(got, want)


def test_the_divergence_picture_shows_both_runs_code_at_the_guard(crash_runs):
    from simcache.render.diverge import divergence_point

    d = divergence_point(*crash_runs)
    assert (d.function, d.line, d.flag, d.steps) == ("_delete_tombstone_leaf", 98, "stale_guards", (261, 261))
    on = sb._code_png(crash_runs[1], 261, d, sb.HALF)
    off = sb._code_png(crash_runs[0], 261, d, sb.HALF)
    green, grey = (0xDC, 0xFC, 0xE7), (0xE5, 0xE7, 0xEB)
    # the guard's row is green where the flag is on (described_fix), grey where it is off (pre_fix)
    assert any(on.getpixel((200, y)) == green for y in range(on.height))
    assert any(off.getpixel((200, y)) == grey for y in range(off.height))
    assert not any(on.getpixel((200, y)) == grey for y in range(on.height))
