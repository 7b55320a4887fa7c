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
    if (!D.dot) { return D.svgs[k]; }
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
    cur = Math.max(0, Math.min(N - 1, i));
    D.runs.forEach(function (r, j) {
      var f = r.frames[cur], sec = $("run" + j);
      sec.querySelector(".caption").textContent = f.caption;
      var tree = sec.querySelector(".tree");
      tree.innerHTML = drawing(f.svg);
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
    $("pos").textContent = "frame " + (cur + 1) + " / " + N + " \u00b7 step " + f.step + " \u00b7 op " + f.op;
    document.body.setAttribute("data-frame", String(cur));
    document.body.setAttribute("data-step", String(f.step));
    renderAhead();
  }

  function stepOp(d) {
    var t;
    if (d > 0) { t = opLast.filter(function (k) { return k > cur; })[0]; }
    else { t = opLast.filter(function (k) { return k < cur; }).pop(); }
    show(t === undefined ? (d > 0 ? N - 1 : 0) : t);
  }

  function jump(kind) {
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

  // the tour: each stop asks first (the frame before it shown), then reveals its frame with the feedback
  function startTour() {
    var k = 0;
    function ask(i) {
      k = Math.max(0, Math.min(D.tour.length - 1, i));
      var s = D.tour[k], q = $("tour-q"), box = $("tour-choices");
      var b = document.createElement("b"), p = document.createElement("p");
      b.textContent = "Stop " + (k + 1) + " of " + D.tour.length + ": " + s.title;
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
      $("tour-feedback").textContent = "Choose an answer to reveal the frame.";
      $("tour-feedback").className = "";
      $("tour-prev").disabled = k === 0;
      $("tour-next").disabled = k === D.tour.length - 1;
      document.body.setAttribute("data-tour-stop", String(k));
      document.body.removeAttribute("data-tour-answered");
      show(s.before);
    }
    function answer(j) {
      var s = D.tour[k], right = j === s.answer;
      Array.prototype.forEach.call($("tour-choices").children, function (btn, i) {
        btn.disabled = true;
        if (i === s.answer) { btn.classList.add("right"); } else if (i === j) { btn.classList.add("wrong"); }
      });
      $("tour-feedback").textContent = (right ? "Right. " : "Not quite: the answer is \u201c" + s.choices[s.answer] +
        "\u201d. ") + s.explain;
      $("tour-feedback").className = right ? "right" : "wrong";
      document.body.setAttribute("data-tour-answered", right ? "right" : "wrong");
      show(s.frame);
    }
    $("tour-prev").onclick = function () { ask(k - 1); };
    $("tour-next").onclick = function () { ask(k + 1); };
    ask(0);
  }
}
