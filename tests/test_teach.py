"""The notebooks' one-line helpers (issue #13, defects 6 and 9): one frame without repeating the 25-line story,
a film strip, finding a micro-step, and readable tables instead of raw dicts and reprs."""
from __future__ import annotations

import pytest

from simcache import teach
from simcache.errors import ConfigError
from simcache.simulate import simulate


def test_show_draws_the_frame_without_repeating_the_why_block_unless_asked():
    run = simulate("crash_pr", "pre_fix")
    plain = teach.show(run, "assertion").html
    assert "Why is this node stale?" not in plain and "Holder ledger" in plain and "Call stack" in plain
    assert "Why is this node stale?" in teach.show(run, "assertion", why=True).html


def test_find_and_strip_draw_the_child_attached_under_the_detached_node():
    run = simulate("crash_pr", "pre_fix")
    attach = teach.find(run, "attach", parent=8, after="went-stale")
    assert run.trace.steps[attach].text == "attach [7]#11 under [1,2]#8 at slot 7"
    assert attach > teach.moment(run, "went-stale")
    html = teach.strip(run, "went-stale", attach, teach.find(run, "write_ack", node=8)).html
    assert html.count("<svg") == 3 and "#11 [7] is attached under #8 [1,2]" in html
    assert "The controller acknowledges the write of #8 [1,2] to the host." in html
    with pytest.raises(ConfigError, match="no 'attach' micro-step with parent=99"):
        teach.find(run, "attach", parent=99)


def test_readable_tables_instead_of_raw_dumps():
    run = simulate("crash_pr", "pre_fix")
    d = teach.damage(run)
    assert d == {"device_kv": {"double_freed": [0, 1]}, "host_kv": {"leaked": [1, 2]}}
    assert "slots [0, 1] freed twice" in d._repr_html_()
    table = teach.flags("pre_fix", "described_fix", "reviewed_fix").html
    assert "<td><code>stale_guards</code></td><td>False</td><td>True</td><td>True</td>" in table
    assert "preset(" not in table and "Flags(" not in table
    assert teach.actors("hidden_needle").splitlines()[0] == "pf   prefetch [1,2,9]  ;  prefetch_done n=3 mamba_hit=True"
