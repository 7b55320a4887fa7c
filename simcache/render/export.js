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
      svg = viz.renderString(text(D.svgs, k), { format: "svg" });
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
  var marks = F0.map(function (f, i) {
    var m = {};
    D.runs.forEach(function (r) { r.frames[i].marks.forEach(function (k) { m[k] = true; }); });
    return m;
  });

  function show(i) {
    cur = Math.max(0, Math.min(limit, i));
    D.runs.forEach(function (r, j) {
      var f = r.frames[cur], sec = $("run" + j);
      sec.querySelector(".caption").textContent = f.caption;
      var tree = sec.querySelector(".tree"), all = $("show-all");
      tree.innerHTML = drawing(all && all.checked && f.all !== null ? f.all : f.svg);
      if (f.focus !== null) {
        var g = tree.querySelector('g[id="n' + f.focus + '"]');
        if (g) { g.classList.add("focus"); }
      }
      var c = sec.querySelector(".tl-cursor");
      if (c) { c.setAttribute("x1", f.x); c.setAttribute("x2", f.x); }
      sec.classList.toggle("diverged", D.divergence !== null && f.op >= D.divergence);
    });
    var f = F0[cur];
    $("explanation").innerHTML = html(f.expl);
    $("stack").innerHTML = html(f.stack);
    $("code").innerHTML = html(f.code);
    $("invariants").innerHTML = html(f.inv);
    $("panels").innerHTML = f.panels.map(html).join("");
    slider.value = String(cur);
    // one counter: the micro-step (each run's, side by side)
    $("pos").textContent = D.runs.length === 1 ? "step " + f.step + " of " + D.runs[0].last :
      D.runs.map(function (r) { return r.label + " step " + r.frames[cur].step + " of " + r.last; }).join(" \u00b7 ");
    showDropped(f);
    document.body.setAttribute("data-frame", String(cur));
    document.body.setAttribute("data-step", String(f.step));
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
      "micro-steps. To step through every micro-step of operations " + d.first[k] + "\u2013" + (end - 1) +
      ", export that window:";
    code.id = "ops-cmd";
    code.textContent = d.cmd.replace(d.sentinel, d.first[k] + ":" + end);
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
      // the first frame of the operation where the runs part (not its end)
      var t = F0.findIndex(function (f) { return f.op >= D.divergence; });
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
  show(0);
  if (D.tour && D.tour.length) { startTour(); }
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
