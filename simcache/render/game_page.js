// The be-the-scheduler page: walks the full map of each level (simcache/game_build.py); no network.
// The data block is gzip-compressed JSON in base64; the browser's DecompressionStream inflates it, offline and from a
// file. Every state of a level is there: its moves (the state each leads to, the sentence it says), its flags and
// its drawing as DOT lines spliced from the state it was found from; the page rebuilds a state's DOT text and draws
// it with the inlined Graphviz WebAssembly build (global Viz), keeping the last drawings.
(function () {
  var el = document.getElementById("game-data");
  var bin = atob(el.textContent.trim()), bytes = new Uint8Array(bin.length);
  for (var b = 0; b < bin.length; b++) { bytes[b] = bin.charCodeAt(b); }
  var text = new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
  Promise.all([text.then(JSON.parse), Viz.instance()]).then(function (r) { simcacheGame(r[0], r[1]); },
    function (e) { document.body.setAttribute("data-error", String(e)); throw e; });
})();

function simcacheGame(D, viz) {
  "use strict";
  var WIN = 1, OVER = 2, DEAD = 4;
  var DEAD_SAID = "From here no order of the remaining moves reaches the assertion: undo, or ask for a hint.";
  var $ = function (id) { return document.getElementById(id); };
  var L, cur, turns, hist, inside, hints, said, hintText, answer;
  var lineMemo = new Map(), svgMemo = new Map(), KEEP = 64;

  function fmt(ts) {  // scheduler.format_turns
    var out = [], i = 0;
    while (i < ts.length) {
      var j = i;
      while (j < ts.length && ts[j] === ts[i]) { j++; }
      out.push(j - i === 1 ? ts[i] : ts[i] + "*" + (j - i));
      i = j;
    }
    return out.join(" ");
  }
  function str(k) { return D.strings[k]; }
  function flags(s) { return L.info[s][0]; }
  function dist(s) { return L.info[s][1]; }
  function done(a) { return turns.filter(function (x) { return x === a; }).length; }

  function linesOf(s) {  // a state's DOT line ids: its source state's, spliced (the chain is at most a level deep)
    var key = L.number + ":" + s, got = lineMemo.get(key);
    if (got) { return got; }
    var d = L.draw[s], out = d[0] < 0 ? [] : linesOf(d[0]).slice();
    d[1].forEach(function (sp) { Array.prototype.splice.apply(out, [sp[0], sp[1]].concat(sp.slice(2))); });
    if (lineMemo.size > 4 * KEEP) { lineMemo.delete(lineMemo.keys().next().value); }
    lineMemo.set(key, out);
    return out;
  }
  function drawn(key, ids) {  // the SVG of DOT lines ``ids``, the last KEEP kept
    var svg = svgMemo.get(key);
    if (svg === undefined) {
      svg = viz.renderString(ids.map(function (k) { return D.lines[k]; }).join("\n"), { format: "svg" });
      svg = svg.slice(svg.indexOf("<svg"));
      if (svgMemo.size >= KEEP) { svgMemo.delete(svgMemo.keys().next().value); }
    } else { svgMemo.delete(key); }
    svgMemo.set(key, svg);
    return svg;
  }

  function start(k) {
    L = D.levels[k]; cur = 0; turns = []; hist = []; inside = null; hints = 0; said = ""; hintText = ""; answer = "";
    $("title").textContent = "Level " + L.number + ": " + L.title;
    $("goal").textContent = L.goal;
    $("inside-controls").style.display = L.inside ? "" : "none";
    $("inside").checked = false;
    var box = $("actors");
    box.innerHTML = "";
    L.actors.forEach(function (a) {
      var b = document.createElement("button");
      b.id = "actor-" + a;
      b.setAttribute("data-actor", a);
      b.addEventListener("click", function () { move(a); });
      box.appendChild(b);
    });
    document.body.setAttribute("data-level", String(L.number));
    show();
  }

  function move(a) {
    var i = L.actors.indexOf(a);
    if (inside) {  // picking the actor inside an operation finishes it
      if (a === inside.actor) { finish(); }
      return;
    }
    var t = L.to[cur][i];
    if (t === undefined || t < 0 || (flags(cur) & OVER)) { return; }
    var pts = L.points[cur + "." + i];
    if (L.inside && $("inside").checked) {
      if (pts) {
        inside = { actor: a, i: i, to: t, pts: pts, at: 0, from: cur };
        said = str(pts[0][1]);
        show();
        return;
      }
      if (dist(cur) < 0) {
        go(i, t);
        said = (said ? said + " " : "") + "(From a position that can no longer reach the assertion, moves run " +
               "whole: this page keeps the points inside write_backup and evict_host for the moves that can still " +
               "win.)";
        show();
        return;
      }
    }
    go(i, t);
    show();
  }
  function go(i, t) {
    hist.push(cur); turns.push(L.actors[i]);
    var was = cur;
    said = str(L.said[was][i]);
    cur = t;
    if ((flags(cur) & DEAD) && !(flags(was) & DEAD)) {
      said = (said ? said + " " : "") + DEAD_SAID;
    }
  }
  function finish() {
    var x = inside;
    inside = null;
    go(x.i, x.to);
    show();
  }
  function nextPoint() {
    if (!inside) { return; }
    inside.at++;
    if (inside.at >= inside.pts.length) { finish(); return; }
    said = str(inside.pts[inside.at][1]);
    show();
  }
  function hint() {
    if (hints < L.hints.length) { hintText = L.hints[hints++]; show(); return; }
    var f = flags(cur);
    if (f & WIN) { hintText = "You have won this level: pick the next one."; }
    else if (dist(cur) > 0) {
      var best = L.actors.filter(function (a, i) {
        var t = L.to[cur][i]; return t >= 0 && dist(t) === dist(cur) - 1;
      })[0];
      hintText = "From here the assertion is " + dist(cur) + " move" + (dist(cur) === 1 ? "" : "s") + " away: try " +
                 best + ".";
    } else {
      hintText = "No order of the remaining moves reaches the assertion from here: undo.";
    }
    show();
  }

  function status() {
    var f = flags(cur), sched = fmt(turns);
    if (inside) {
      var p = inside.pts[inside.at];
      return "Inside " + inside.actor + "'s operation, point " + (inside.at + 1) + " of " + inside.pts.length + ": " +
             str(p[0]) + ". Next point, or pick " + inside.actor + " to finish it. The other actors wait: SGLang's " +
             "scheduler thread runs write_backup and evict_host to the end.";
    }
    if (f & WIN) { return "You made the cache reach the assertion: " + str(L.info[cur][2]) + " with the schedule '" + sched + "'."; }
    if (f & OVER) { return "The cache raised something else: " + str(L.info[cur][2]) + " ('" + sched + "'). Undo and try another order."; }
    if (L.actors.every(function (a) { return done(a) >= L.ops[a].length; })) {
      return "Every actor is done and the cache survived ('" + sched + "'). Reset and try another order.";
    }
    var stale = L.info[cur].slice(3);
    var note = stale.length ? " A node has gone stale (#" + stale[stale.length - 1] + "): keep going." : "";
    return "Schedule so far: '" + (sched || "(none)") + "'. Pick who moves next." + note;
  }

  function show() {
    var f = flags(cur), win = (f & WIN) && !inside;
    L.actors.forEach(function (a, i) {
      var b = $("actor-" + a), k = done(a), left = k < L.ops[a].length;
      b.textContent = a + ": " + (left ? L.ops[a][k] : "done");
      b.className = left ? "" : "done";
      b.disabled = inside ? a !== inside.actor : (!left || (f & OVER) !== 0);
    });
    $("next-point").disabled = !inside;
    $("undo").disabled = !inside && !hist.length;
    $("status").textContent = status();
    $("status").className = win ? "win" : (f & OVER) && !inside ? "over" : "";
    $("why").textContent = win ? L.why : "";
    $("said").textContent = said;
    $("hint-text").textContent = hintText ? "Hint: " + hintText : "";
    $("answer").textContent = answer;
    if (inside) {
      var j = inside.pts[inside.at][2];
      $("tree").innerHTML = drawn("p" + L.number + ":" + j, L.pdraw[j]);
    } else {
      $("tree").innerHTML = drawn(L.number + ":" + cur, linesOf(cur));
    }
    // a crash, and the points inside a move, are drawn from one run that reaches them: say which, if not yours
    var from = L.drawn_from[String(inside ? inside.from : cur)];
    var mine = turns.join(" ");
    $("tree-note").textContent = ((inside || (f & OVER)) && from !== undefined && from !== mine) ?
      "(Drawn from the run of '" + fmt(from.split(" ").filter(Boolean)) + "', which reaches the same state; its " +
      "step numbers are that run's.)" : "";
    document.body.setAttribute("data-state", String(cur));
    document.body.setAttribute("data-turns", turns.join(" "));
    document.body.setAttribute("data-outcome", win ? "win" : (f & OVER) ? "crash" : (f & DEAD) ? "dead" : "open");
  }

  $("level").addEventListener("change", function () { start(Number($("level").value)); });
  $("next-point").addEventListener("click", nextPoint);
  $("undo").addEventListener("click", function () {
    if (inside) { inside = null; } else if (hist.length) { cur = hist.pop(); turns.pop(); }
    said = ""; show();
  });
  $("reset").addEventListener("click", function () { start(D.levels.indexOf(L)); });
  $("hint").addEventListener("click", hint);
  $("reveal").addEventListener("click", function () { answer = "A winning schedule: " + L.solution; show(); });
  var first = Number(new URLSearchParams(location.search).get("level") || 0);
  var pick = D.levels.findIndex(function (lv) { return lv.number === first; });
  if (pick > 0) { $("level").value = String(pick); }
  start(pick > 0 ? pick : 0);
  document.body.setAttribute("data-ready", "1");
}
