// simcache export page: swaps frames in and out. Data: the JSON block #simcache-data (svgs and html are
// deduplicated strings; each frame names them by index). A long run's block is gzip + base64 and packed: its
// "svgs" (DOT text, drawn on demand by the inlined Graphviz WebAssembly build, global Viz, the last few kept) and
// "html" are lists of indices into "parts", joined when a frame shows them. No network.
// The script runs in the head, before the body is parsed: it starts the slow parts (decoding the block, compiling
// Graphviz) at once and shows the first frame when they are done and the body is there.
(function () {
  "use strict";
  var el = document.getElementById("simcache-data");
  var body = new Promise(function (ok) {
    if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", ok); } else { ok(); }
  });
  if (el.getAttribute("data-encoding") !== "gzip-base64") {
    body.then(function () { simcacheStart(JSON.parse(el.textContent), null); });
    return;
  }
  var b64 = el.textContent.trim(), bytes;
  if (Uint8Array.fromBase64) { bytes = Uint8Array.fromBase64(b64); } else {  // older browsers: byte by byte
    var bin = atob(b64);
    bytes = new Uint8Array(bin.length);
    for (var b = 0; b < bin.length; b++) { bytes[b] = bin.charCodeAt(b); }
  }
  var text = new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
  Promise.all([text.then(JSON.parse), Viz.instance(), body]).then(function (r) { simcacheStart(r[0], r[1]); },
    function (e) {
      // a failure can come before the body is parsed
      body.then(function () { document.body.setAttribute("data-error", String(e)); });
      throw e;
    });
})();

function simcacheStart(D, viz) {
  "use strict";
  var F0 = D.runs[0].frames, N = F0.length, cur = 0;
  var limit = N - 1;  // the last frame a learner may see: a tour keeps the frames past its open question hidden
  function text(store, k) {  // a stored text; in a packed block, its pieces joined
    var t = store[k];
    if (typeof t === "string") { return t; }
    var s = "";
    for (var j = 0; j < t.length; j++) { s += D.parts[t[j]]; }
    return s;
  }
  function html(k) { return text(D.html, k); }
  var drawn = new Map(), KEEP = 48;  // DOT index -> SVG text, most recently used last
  function drawing(k) {
    if (!D.dot) { return text(D.svgs, k); }
    var svg = drawn.get(k);
    if (svg === undefined) {
      var src = text(D.svgs, k);  // a pinned drawing (stable positions) is laid out by neato
      svg = viz.renderString(src, { format: "svg", engine: src.indexOf('layout="neato"') >= 0 ? "neato" : "dot" });
      svg = svg.slice(svg.indexOf("<svg"));
      if (drawn.size >= KEEP) { drawn.delete(drawn.keys().next().value); }
    } else { drawn.delete(k); }
    drawn.set(k, svg);
    return svg;
  }
  var ahead = null;
  function renderAhead() {  // while the reader looks, draw the frames a step or two away (one per tick)
    if (!D.dot) { return; }
    if (ahead !== null) { clearTimeout(ahead); }
    var todo = [cur + 1, cur + 2, cur - 1, cur + 3, cur + 4, cur - 2];
    function next() {
      ahead = null;
      while (todo.length) {
        var i = todo.shift();
        if (i < 0 || i >= N) { continue; }
        var need = D.runs.map(function (r) { return r.frames[i].svg; })
          .filter(function (k) { return !drawn.has(k); });
        if (!need.length) { continue; }
        need.forEach(function (k) { drawing(k); });
        ahead = setTimeout(next, 0);
        return;
      }
    }
    ahead = setTimeout(next, 20);
  }
  var $ = function (id) { return document.getElementById(id); };
  var slider = $("slider");
  slider.max = String(N - 1);
  var opLast = [];  // frame indices that are the last frame of their operation (the state after it)
  for (var i = 0; i < N; i++) { if (i === N - 1 || F0[i + 1].op !== F0[i].op) { opLast.push(i); } }
  // a moment counts at the first frame that shows its step: a run that stopped stays on its last step, and its
  // assertion must not mark every later frame of the other run (a jump would crawl one frame per click)
  var marks = F0.map(function (f, i) {
    var m = {};
    D.runs.forEach(function (r) {
      if (i > 0 && r.frames[i - 1].step === r.frames[i].step) { return; }
      r.frames[i].marks.forEach(function (k) { m[k] = true; });
    });
    return m;
  });

  // the page fits the window: the run's view and its code share what is left below the controls
  var layout = $("layout");
  function fit() {
    var top = layout.getBoundingClientRect().top + window.scrollY;
    var sticky = $("controls").getBoundingClientRect().height;
    layout.style.setProperty("--h", Math.max(440, Math.min(window.innerHeight - top, window.innerHeight - sticky)
      - 8) + "px");
  }
  // scroll a code pane (not the page) so that its \u25b6 line is in view
  function reveal(box) {
    var c = box.querySelector(".sc-guard") || box.querySelector(".sc-cur");  // a comparison's guard first
    if (!c) { return; }
    var b = box.getBoundingClientRect(), r = c.getBoundingClientRect(), room = Math.min(60, b.height / 4);
    // the least scroll that shows it with a little room: the frames above it (the stack) stay in view if they can
    if (r.bottom > b.bottom - room) { box.scrollTop += r.bottom - b.bottom + room; }
    else if (r.top < b.top + room) { box.scrollTop -= b.top + room - r.top; }
  }
  // Python Tutor's arrows: from each frame's local in the code pane to the detached node it holds in the tree
  var ARROW_DEFS = '<defs><marker id="ahr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" ' +
    'orient="auto"><path d="M0,0L10,5L0,10z" fill="#dc2626"/></marker><marker id="ahg" viewBox="0 0 10 10" ' +
    'refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0L10,5L0,10z" fill="#6b7280"/>' +
    '</marker></defs>';
  var arrowTick = null;
  function drawArrows() {
    arrowTick = null;
    var out = [];
    if (D.runs.length > 1) { $("arrows").innerHTML = ""; return; }  // side by side, each tree's own box says it
    D.runs.forEach(function (r, j) {
      var sec = $("run" + j), box = sec.querySelector(".code"), tree = sec.querySelector(".tree");
      var b = box.getBoundingClientRect();
      Array.prototype.forEach.call(box.querySelectorAll("a.sc-node"), function (a) {
        var g = tree.querySelector('g[id="n' + a.getAttribute("data-node") + '"]');
        if (!g || !(g.classList.contains("stale") || g.classList.contains("detached"))) { return; }
        var s = a.getBoundingClientRect(), t = g.getBoundingClientRect();
        if (!s.width || s.bottom < b.top || s.top > b.bottom) { return; }  // scrolled out of its pane
        // from the pane's edge at the local's line (not across the source) to the node's box
        var red = g.classList.contains("stale"), x1 = b.left - 2, y1 = s.top + s.height / 2;
        var x2 = t.right < x1 ? t.right : t.left + t.width / 2, y2 = t.right < x1 ? t.top + t.height / 2 : t.bottom;
        var bend = Math.max(40, Math.abs(x1 - x2) / 3);
        out.push('<path class="' + (red ? "a-red" : "a-grey") + '" data-node="' + a.getAttribute("data-node") +
          '" d="M' + x1 + " " + y1 + " C" + (x1 - bend) + " " + y1 + " " + (x2 + (t.right < x1 ? bend : 0)) + " " +
          (y2 + (t.right < x1 ? 0 : bend)) + " " + x2 + " " + y2 + '" marker-end="url(#ah' + (red ? "r" : "g") + ')"/>');
      });
    });
    $("arrows").innerHTML = ARROW_DEFS + out.join("");
    document.body.setAttribute("data-arrows", String(out.length));
  }
  function arrowsSoon() { if (arrowTick === null) { arrowTick = requestAnimationFrame(drawArrows); } }
  window.addEventListener("scroll", arrowsSoon, true);  // the page, and each code pane (capture)
  window.addEventListener("resize", function () { fit(); arrowsSoon(); });
  document.addEventListener("toggle", arrowsSoon, true);

  function show(i) {
    cur = Math.max(0, Math.min(limit, i));
    D.runs.forEach(function (r, j) {
      var f = r.frames[cur], sec = $("run" + j);
      sec.querySelector(".caption").textContent = f.caption;
      var tree = sec.querySelector(".tree"), all = $("show-all");
      tree.innerHTML = drawing(all && all.checked && f.all !== null ? f.all : f.svg);
      var svg = tree.querySelector("svg");  // scaled down to fit, never up past its own size
      if (svg) { svg.style.maxWidth = svg.getAttribute("width"); svg.style.maxHeight = svg.getAttribute("height"); }
      var code = sec.querySelector(".code");
      code.innerHTML = html(f.code);
      sec.querySelector(".holders").innerHTML = html(f.panels[3]);
      var more = $("more" + j);
      more.querySelector(".explanation").innerHTML = html(f.expl);
      more.querySelector(".stack").innerHTML = html(f.stack);
      more.querySelector(".invariants").innerHTML = html(f.inv);
      // side by side, each column's holders go below (the tree's own box names them): the trees get the room
      more.querySelector(".panels").innerHTML = (D.runs.length > 1 ? html(f.panels[3]) : "") +
        f.panels.slice(0, 3).map(html).join("");
      reveal(code);
      if (f.focus !== null) {
        var g = tree.querySelector('g[id="n' + f.focus + '"]');
        if (g) { g.classList.add("focus"); }
      }
      var c = sec.querySelector(".tl-cursor");
      if (c) { c.setAttribute("x1", f.x); c.setAttribute("x2", f.x); }
      sec.classList.toggle("diverged", D.divergence !== null && f.op >= D.divergence);
    });
    var f = F0[cur];
    slider.value = String(cur);
    // one counter: the micro-step (each run's, side by side)
    $("pos").textContent = D.runs.length === 1 ? "step " + f.step + " of " + D.runs[0].last :
      D.runs.map(function (r) { return r.label + " step " + r.frames[cur].step + " of " + r.last; }).join(" \u00b7 ");
    showDropped(f);
    document.body.setAttribute("data-frame", String(cur));
    document.body.setAttribute("data-step", String(f.step));
    drawArrows();
    renderAhead();
  }

  // a long run's page holds operation ends and moments only: say so, with the command that gets the rest
  function showDropped(f) {
    var box = $("dropped"), r = D.runs[0], d = r.dropped;
    if (!d) { box.textContent = ""; return; }
    var k = d.first.indexOf(r.frames[cur].num), end = k < 0 ? null : d.windows[k];
    if (box.getAttribute("data-op") === String(k)) { return; }
    box.setAttribute("data-op", String(k));
    box.className = "sc-note";
    box.innerHTML = "";
    var p = document.createElement("p"), code = document.createElement("code");
    p.textContent = "This page holds " + d.shown.toLocaleString("en") + " of the run's " + d.total.toLocaleString("en") +
      " micro-steps: the state after each operation and every key moment, so \u201cstep \u25b6\u201d may skip " +
      "micro-steps. To step through every micro-step of " + (end - 1 > d.first[k] ? "operations " + d.first[k] +
      "\u2013" + (end - 1) : "operation " + d.first[k]) + ", export that window:";
    code.id = "ops-cmd";
    code.textContent = d.cmd ? d.cmd.replace(d.sentinel, d.first[k] + ":" + end) :
      "--ops " + d.first[k] + ":" + end + "  (this run's scenario came from Python data: save it to a file to export it)";
    box.append(p, code);
  }

  function stepOp(d) {
    var t;
    if (d > 0) { t = opLast.filter(function (k) { return k > cur; })[0]; }
    else { t = opLast.filter(function (k) { return k < cur; }).pop(); }
    show(t === undefined ? (d > 0 ? N - 1 : 0) : t);
  }

  function jump(kind) {
    if (limit < N - 1) { return false; }  // a tour's question is open: a jump would give its answer away
    for (var k = 1; k <= N; k++) {
      var i = (cur + k) % N;  // wraps around: from the end, a jump goes back to the first one
      if (marks[i][kind]) { show(i); return true; }
    }
    return false;
  }

  function toStep(runIndex, step) {
    var fr = D.runs[runIndex].frames;
    for (var i = 0; i < N; i++) { if (fr[i].step >= step) { show(i); return; } }
    show(N - 1);
  }

  $("btn-first").onclick = function () { show(0); };
  $("btn-last").onclick = function () { show(N - 1); };
  $("btn-prev").onclick = function () { show(cur - 1); };
  $("btn-next").onclick = function () { show(cur + 1); };
  $("btn-prev-op").onclick = function () { stepOp(-1); };
  $("btn-next-op").onclick = function () { stepOp(1); };
  slider.oninput = function () { show(parseInt(slider.value, 10)); };
  Array.prototype.forEach.call(document.querySelectorAll("button.jump"), function (b) {
    var kind = b.getAttribute("data-kind");
    if (!marks.some(function (m) { return m[kind]; })) { b.disabled = true; b.title = "none in this run"; }
    b.onclick = function () { jump(kind); };
  });
  if ($("show-all")) { $("show-all").onchange = function () { show(cur); }; }
  if ($("btn-divergence")) {
    $("divergence").textContent = D.divergence_text;
    $("btn-divergence").onclick = function () {
      // the divergent step itself (both code panes mark the guard there), else the divergent operation's start
      var t = D.divergence_frame;
      if (t === null || t === undefined) { t = F0.findIndex(function (f) { return f.op >= D.divergence; }); }
      show(t < 0 ? N - 1 : t);
    };
  }
  D.runs.forEach(function (r, j) {  // one listener per lane (a long run has thousands of blocks; CSS sets the cursor)
    $("run" + j).querySelector(".timeline").addEventListener("click", function (e) {
      var g = e.target.closest("g.tl-op, g.tl-moment");
      if (g) { toStep(j, parseInt(g.getAttribute("data-step"), 10)); }
    });
  });
  document.addEventListener("keydown", function (e) {
    var keys = { ArrowRight: function () { show(cur + 1); }, ArrowLeft: function () { show(cur - 1); },
      ArrowDown: function () { stepOp(1); }, ArrowUp: function () { stepOp(-1); },
      Home: function () { show(0); }, End: function () { show(N - 1); },
      s: function () { jump("went-stale"); }, a: function () { jump("assertion"); } };
    if (keys[e.key]) { e.preventDefault(); keys[e.key](); }
  });
  fit();
  show(0);
  if (D.tour && D.tour.length) { startTour(); }
  fit();
  drawArrows();
  document.body.setAttribute("data-ready", "1");

  // the tour: each stop asks first (the frame before it shown, nothing later reachable); a wrong pick shows its hint
  // and is locked, the learner tries again; the right pick (or "show the answer") reveals the stop's frame. The score
  // counts the stops right at the first try; "next stop" opens once a stop is answered.
  function startTour() {
    var T = D.tour, k = 0, wrong = T.map(function () { return []; }), solved = T.map(function () { return false; });
    var gaveUp = T.map(function () { return false; }), jumps = document.querySelector(".jumps");
    function firstOpen() { var j = solved.indexOf(false); return j < 0 ? null : j; }
    function setLimit() {
      var j = firstOpen();
      limit = j === null ? N - 1 : Math.max(T[j].before, j > 0 ? T[j - 1].frame : 0);
      var step = F0[limit].step, open = j !== null;
      Array.prototype.forEach.call(document.querySelectorAll(".timeline g[data-step]"), function (g) {
        g.classList.toggle("tl-hidden", open && parseInt(g.getAttribute("data-step"), 10) > step);
      });
      if (jumps) { jumps.style.visibility = open ? "hidden" : ""; }
      document.body.setAttribute("data-tour-limit", String(limit));
    }
    function score() {
      var right = 0, answered = 0;
      T.forEach(function (s, i) {
        if (solved[i]) { answered++; if (!wrong[i].length && !gaveUp[i]) { right++; } }
      });
      $("tour-score").textContent = "Score: " + right + " of " + answered + " answered right at the first try (" +
        T.length + " stops in all)." + (firstOpen() === null ? " The tour is over: the whole run is open." : "");
      document.body.setAttribute("data-tour-score", String(right));
    }
    function feedback(i) {
      var s = T[i], lead = "Right.";
      if (gaveUp[i]) { lead = "The answer is \u201c" + s.choices[s.answer] + "\u201d."; }
      else if (wrong[i].length) { lead = "Right, at try " + (wrong[i].length + 1) + ": \u201c" + s.choices[s.answer] + "\u201d."; }
      return lead + " " + s.explain;
    }
    function paint() {
      var s = T[k];
      Array.prototype.forEach.call($("tour-choices").children, function (btn, j) {
        btn.disabled = solved[k] || wrong[k].indexOf(j) >= 0;
        btn.classList.toggle("right", solved[k] && j === s.answer);
        btn.classList.toggle("wrong", wrong[k].indexOf(j) >= 0);
      });
      $("tour-prev").disabled = k === 0;
      $("tour-next").disabled = k === T.length - 1 || !solved[k];
      $("tour-giveup").disabled = solved[k];
      setLimit();
      score();
      show(solved[k] ? s.frame : s.before);
    }
    function ask(i) {
      var open = firstOpen();
      k = Math.max(0, Math.min(T.length - 1, i, open === null ? T.length - 1 : open));
      var s = T[k], q = $("tour-q"), box = $("tour-choices");
      var b = document.createElement("b"), p = document.createElement("p");
      b.textContent = "Stop " + (k + 1) + " of " + T.length + ": " + s.title;
      p.textContent = s.ask;
      q.innerHTML = "";
      q.append(b, p);
      box.innerHTML = "";
      s.choices.forEach(function (text, j) {
        var btn = document.createElement("button");
        btn.className = "tour-choice";
        btn.textContent = "ABCDEF"[j] + ". " + text;
        btn.onclick = function () { answer(j); };
        box.appendChild(btn);
      });
      if (solved[k]) {
        $("tour-feedback").textContent = feedback(k);
        $("tour-feedback").className = wrong[k].length || gaveUp[k] ? "" : "right";
      } else {
        $("tour-feedback").textContent = "Choose an answer to reveal the frame.";
        $("tour-feedback").className = "";
      }
      document.body.setAttribute("data-tour-stop", String(k));
      document.body.removeAttribute("data-tour-answered");
      paint();
    }
    function answer(j) {
      var s = T[k];
      if (solved[k] || wrong[k].indexOf(j) >= 0) { return; }
      if (j !== s.answer) {
        wrong[k].push(j);
        $("tour-feedback").textContent = "Not quite. Hint: " + s.hints[j] + " Try again.";
        $("tour-feedback").className = "wrong";
        document.body.setAttribute("data-tour-answered", "wrong");
        paint();
        return;
      }
      solved[k] = true;
      $("tour-feedback").textContent = feedback(k);
      $("tour-feedback").className = wrong[k].length ? "" : "right";
      document.body.setAttribute("data-tour-answered", "right");
      paint();
    }
    $("tour-prev").onclick = function () { ask(k - 1); };
    $("tour-next").onclick = function () { ask(k + 1); };
    $("tour-giveup").onclick = function () {
      if (solved[k]) { return; }
      solved[k] = gaveUp[k] = true;
      $("tour-feedback").textContent = feedback(k);
      $("tour-feedback").className = "";
      document.body.setAttribute("data-tour-answered", "shown");
      paint();
    };
    ask(0);
  }
}
