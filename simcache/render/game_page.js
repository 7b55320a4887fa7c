// The be-the-scheduler page: walks the precomputed map of each level (simcache/game_map.py); no network.
// The data block is gzip-compressed JSON in base64 (the drawings compress about 12 times); the browser's
// DecompressionStream inflates it, offline and from a file.
(function () {
  var el = document.getElementById("game-data");
  var bin = atob(el.textContent.trim()), bytes = new Uint8Array(bin.length);
  for (var b = 0; b < bin.length; b++) { bytes[b] = bin.charCodeAt(b); }
  new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text().then(function (t) {
    simcacheGame(JSON.parse(t));
  }, function (e) { document.body.setAttribute("data-error", String(e)); throw e; });
})();

function simcacheGame(D) {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };
  var L, cur, hist, inside, hints, said, hintText, answer;

  function fmt(turns) {  // scheduler.format_turns
    var out = [], i = 0;
    while (i < turns.length) {
      var j = i;
      while (j < turns.length && turns[j] === turns[i]) { j++; }
      out.push(j - i === 1 ? turns[i] : turns[i] + "*" + (j - i));
      i = j;
    }
    return out.join(" ");
  }
  function state() { return L.states[cur]; }
  function done(actor) { return state().turns.filter(function (a) { return a === actor; }).length; }

  function start(k) {
    L = D.levels[k]; cur = 0; hist = []; inside = null; hints = 0; said = ""; hintText = ""; answer = "";
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
    show();
  }

  function move(a) {
    var s = state();
    if (inside) {  // picking the actor inside an operation finishes it
      if (a !== inside.actor) { return; }
      finish();
      return;
    }
    var e = s.edges[a];
    if (!e) { return; }
    if (e.to < 0) {
      said = "That move leads outside the part of this level the page holds (the states nearest the solution). " +
             "Undo, or run the notebook to play it freely.";
      show();
      return;
    }
    if (L.inside && $("inside").checked && e.points.length) {
      inside = {actor: a, edge: e, at: 0};
      said = e.points[0].said;
      show();
      return;
    }
    hist.push(cur); cur = e.to; said = e.said; deadNote(); show();
  }
  function finish() {
    var e = inside.edge;
    inside = null; hist.push(cur); cur = e.to; said = e.said; deadNote(); show();
  }
  function deadNote() {
    var s = state(), was = L.states[hist[hist.length - 1]];
    if (s.dead && !s.win && !(was && was.dead)) {
      said = (said ? said + " " : "") + "From here no order of the remaining moves reaches the assertion: " +
             "undo, or ask for a hint.";
    }
  }
  function nextPoint() {
    if (!inside) { return; }
    inside.at++;
    if (inside.at >= inside.edge.points.length) { finish(); return; }
    said = inside.edge.points[inside.at].said;
    show();
  }
  function hint() {
    if (hints < L.hints.length) { hintText = L.hints[hints++]; show(); return; }
    var s = state();
    if (s.win) { hintText = "You have won this level: pick the next one."; }
    else if (s.dist !== null) {
      var best = L.actors.filter(function (a) {
        var e = s.edges[a]; return e && e.to >= 0 && L.states[e.to].dist === s.dist - 1;
      })[0];
      hintText = "From here the assertion is " + s.dist + " move" + (s.dist === 1 ? "" : "s") + " away: try " + best + ".";
    } else if (s.dead) {
      hintText = "No order of the remaining moves reaches the assertion from here: undo.";
    } else {
      hintText = "This page knows no win from here (it holds the states nearest the solution): undo towards it.";
    }
    show();
  }

  function status() {
    var s = state(), sched = fmt(s.turns);
    if (inside) {
      var p = inside.edge.points[inside.at];
      return "Inside " + inside.actor + "'s operation, point " + (inside.at + 1) + " of " + inside.edge.points.length +
             ": " + p.text + ". Next point, or pick " + inside.actor + " to finish it. The other actors wait: " +
             "SGLang's scheduler thread runs write_backup and evict_host to the end.";
    }
    if (s.win) { return "You made the cache reach the assertion: " + s.crash + " with the schedule '" + sched + "'."; }
    if (s.over) { return "The cache raised something else: " + s.crash + " ('" + sched + "'). Undo and try another order."; }
    if (L.actors.every(function (a) { return done(a) >= L.ops[a].length; })) {
      return "Every actor is done and the cache survived ('" + sched + "'). Reset and try another order.";
    }
    var stale = s.stale.length ? " A node has gone stale (#" + s.stale[s.stale.length - 1] + "): keep going." : "";
    return "Schedule so far: '" + (sched || "(none)") + "'. Pick who moves next." + stale;
  }

  function show() {
    var s = state();
    L.actors.forEach(function (a) {
      var b = $("actor-" + a), k = done(a), left = k < L.ops[a].length;
      b.textContent = a + ": " + (left ? L.ops[a][k] : "done");
      b.className = left ? "" : "done";
      b.disabled = inside ? a !== inside.actor : (!left || s.over);
    });
    $("next-point").disabled = !inside;
    $("undo").disabled = !inside && !hist.length;
    $("status").textContent = status();
    $("status").className = s.win && !inside ? "win" : "";
    $("said").textContent = said;
    $("hint-text").textContent = hintText ? "Hint: " + hintText : "";
    $("answer").textContent = answer;
    $("tree").innerHTML = D.svgs[inside ? inside.edge.points[inside.at].svg : s.svg];
    document.body.setAttribute("data-state", String(cur));
  }

  $("level").addEventListener("change", function () { start(Number($("level").value)); });
  $("next-point").addEventListener("click", nextPoint);
  $("undo").addEventListener("click", function () {
    if (inside) { inside = null; } else if (hist.length) { cur = hist.pop(); }
    said = ""; show();
  });
  $("reset").addEventListener("click", function () { start(D.levels.indexOf(L)); });
  $("hint").addEventListener("click", hint);
  $("reveal").addEventListener("click", function () { answer = "A winning schedule: " + L.solution; show(); });
  start(0);
  document.body.setAttribute("data-ready", "1");
}
