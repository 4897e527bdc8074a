// runbook web UI: progressive enhancements over server-rendered pages.
// Every page works without this script; it adds live updates (the API's
// Server-Sent Events of a run, a periodic refresh of lists), local and
// relative times, keyboard navigation and confirmations. No dependency.
"use strict";
(function () {
  var doc = document;
  var root = doc.documentElement;

  // ---- times: relative or absolute, in the browser's zone ----
  var timeMode = "relative";
  try { timeMode = localStorage.getItem("rb-times") || "relative"; } catch (e) { /* storage off */ }

  function relative(ms) {
    var d = (Date.now() - ms) / 1000, future = d < 0;
    d = Math.abs(d);
    var s;
    if (d < 10) return future ? "in a few s" : "just now";
    if (d < 60) s = Math.floor(d) + " s";
    else if (d < 3600) s = Math.floor(d / 60) + " min";
    else if (d < 172800) s = Math.floor(d / 3600) + " h";
    else s = Math.floor(d / 86400) + " days";
    return future ? "in " + s : s + " ago";
  }

  function absolute(ms) {
    var t = new Date(ms);
    function p(n) { return (n < 10 ? "0" : "") + n; }
    return t.getFullYear() + "-" + p(t.getMonth() + 1) + "-" + p(t.getDate()) + " " + p(t.getHours()) + ":" + p(t.getMinutes()) + ":" + p(t.getSeconds());
  }

  function renderTimes(scope) {
    var list = (scope || doc).querySelectorAll("time[data-rel]");
    for (var i = 0; i < list.length; i++) {
      var el = list[i], ms = Date.parse(el.getAttribute("datetime"));
      if (isNaN(ms)) continue;
      var rel = relative(ms), abs = absolute(ms);
      el.textContent = timeMode === "absolute" ? abs : rel;
      el.title = (timeMode === "absolute" ? rel : abs) + " (" + el.getAttribute("datetime") + ")";
    }
    var btn = doc.getElementById("time-mode");
    if (btn) btn.textContent = "Times: " + timeMode;
  }

  // The time a running step has run ([data-since]), as the server
  // writes it (fmtDuration), going by.
  function duration(ms) {
    function p2(n) { return (n < 10 ? "0" : "") + n; }
    var s = ms / 1000;
    if (s < 60) return s.toFixed(2) + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + p2(Math.floor(s % 60)) + "s";
    return Math.floor(s / 3600) + "h " + p2(Math.floor(s / 60) % 60) + "m";
  }

  function since() {
    var list = doc.querySelectorAll("[data-since]");
    for (var i = 0; i < list.length; i++) {
      var ms = Date.now() - Date.parse(list[i].getAttribute("data-since"));
      if (!isNaN(ms) && ms >= 0) list[i].textContent = duration(ms);
    }
  }

  function toggleTimes() {
    timeMode = timeMode === "relative" ? "absolute" : "relative";
    try { localStorage.setItem("rb-times", timeMode); } catch (e) { /* storage off */ }
    renderTimes();
  }

  // ---- refreshing server-rendered regions ----
  // Each [data-region] of the page is replaced by the same region of a
  // fresh copy of the page. An approval form whose step did not change
  // keeps what the user typed; a <details> the user opened or closed
  // stays so (the others take the server's choice: a step that ends
  // folds its output away, one that fails unfolds it).
  function detailsKey(d) {
    var host = d.closest("[id]");
    return (host ? host.id : "") + "/" + d.className;
  }

  function swapRegions(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var regions = fresh.querySelectorAll("[data-region]");
    for (var i = 0; i < regions.length; i++) {
      var next = regions[i], name = next.getAttribute("data-region");
      var cur = doc.querySelector('[data-region="' + name + '"]');
      if (!cur) continue;
      if (name === "approval" && cur.getAttribute("data-key") === next.getAttribute("data-key") && cur.querySelector("form")) continue;
      var open = {};
      var ds = cur.querySelectorAll("details[data-user]");
      for (var j = 0; j < ds.length; j++) open[detailsKey(ds[j])] = ds[j].open;
      if (cur.tagName === "DETAILS" && cur.hasAttribute("data-user")) open["@self"] = cur.open;
      var atBottom = {};
      var logs = cur.querySelectorAll(".log");
      for (j = 0; j < logs.length; j++) atBottom[logs[j].id] = logs[j].scrollTop + logs[j].clientHeight >= logs[j].scrollHeight - 4;
      var node = doc.importNode(next, true);
      cur.replaceWith(node);
      ds = node.querySelectorAll("details");
      for (j = 0; j < ds.length; j++) {
        var k = detailsKey(ds[j]);
        if (k in open) { ds[j].open = open[k]; ds[j].setAttribute("data-user", ""); }
      }
      if (node.tagName === "DETAILS" && "@self" in open) { node.open = open["@self"]; node.setAttribute("data-user", ""); }
      logs = node.querySelectorAll(".log");
      for (j = 0; j < logs.length; j++) if (atBottom[logs[j].id] !== false) logs[j].scrollTop = logs[j].scrollHeight;
      renderTimes(node);
    }
    var run = fresh.getElementById("run");
    var mine = doc.getElementById("run");
    if (run && mine && !run.hasAttribute("data-follow")) mine.removeAttribute("data-follow");
    return run ? Number(run.getAttribute("data-after") || "0") : 0;
  }

  function fetchPage() {
    return fetch(location.pathname + location.search, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (r.redirected && r.url.indexOf("/login") >= 0) throw new Error("signed out");
        if (!r.ok && r.status !== 400) throw new Error("status " + r.status);
        return r.text();
      });
  }

  // A list ([data-live-list]: the runs, the playbooks) reads itself again
  // when the server's stream of run changes (/live) says so, at most once
  // a second and while the page is visible; while the stream is down
  // (its connection lost, or refused) it polls ([data-poll] ms) until the
  // stream is open again. Other lists
  // ([data-poll]) poll while the page is visible.
  function startLists() {
    var el = doc.querySelector("[data-poll]");
    if (!el) return;
    var every = parseInt(el.getAttribute("data-poll"), 10) || 3000;
    var busy = false, again = false, last = 0, timer = null;
    function refresh() {
      if (busy) { again = true; return; }
      if (doc.visibilityState !== "visible") { again = true; return; }
      if (doc.activeElement && doc.activeElement.closest && doc.activeElement.closest("[data-poll]")) return;
      busy = true;
      last = Date.now();
      fetchPage().then(swapRegions).catch(function () { markLost(); }).then(function () {
        busy = false;
        if (again) { again = false; soon(); }
      });
    }
    function soon() { // bound the rate: one refresh a second at most
      if (timer) return;
      timer = setTimeout(function () { timer = null; refresh(); }, Math.max(0, 1000 - (Date.now() - last)));
    }
    doc.addEventListener("visibilitychange", function () { if (doc.visibilityState === "visible" && again) { again = false; soon(); } });
    var polling = null;
    function poll(on) {
      if (on && !polling) polling = setInterval(refresh, every);
      if (!on && polling) { clearInterval(polling); polling = null; }
    }
    if (!el.hasAttribute("data-live-list") || !window.EventSource) { poll(true); return; }
    var opened = false;
    function open() {
      var es = new EventSource("/live");
      es.addEventListener("ready", function () {
        poll(false);
        root.setAttribute("data-list-live", "stream");
        if (opened) soon(); // what changed while it was down
        opened = true;
      });
      es.addEventListener("changed", soon);
      es.onerror = function () {
        // Down: poll until "ready" says it is back. A lost connection is
        // opened again by the browser, which keeps trying; one answered
        // with an error (a proxy's 502) is closed, and opened here again.
        root.setAttribute("data-list-live", "polling");
        poll(true);
        if (es.readyState === EventSource.CLOSED) setTimeout(open, 10000);
      };
    }
    open();
  }

  // seen records, for each event of a run, when the page showed it
  // (appended to the logs) and when the page's regions next reflected it
  // (the browser test compares these with when the API first had it).
  var seen = window.runbookSeen = {};

  function markLost() {
    var l = doc.querySelectorAll("[data-live-label]");
    for (var i = 0; i < l.length; i++) { l[i].classList.add("lost"); l[i].textContent = "live updates lost: reload the page"; }
  }

  // ---- a run, live ----
  var eventTypes = ["run.created", "run.started", "run.resumed", "run.queued", "run.waiting", "run.succeeded", "run.failed",
    "run.cancelled", "run.skipped", "run.suspended", "step.started", "step.succeeded", "step.failed", "step.cancelled",
    "step.skipped", "step.retry", "step.waiting", "step.reconciled", "step.reused", "approval.requested", "approval.answered", "log"];

  function clock(t) {
    var d = new Date(t);
    function p(n, w) { n = String(n); while (n.length < (w || 2)) n = "0" + n; return n; }
    return p(d.getUTCHours()) + ":" + p(d.getUTCMinutes()) + ":" + p(d.getUTCSeconds()) + "." + p(d.getUTCMilliseconds(), 3);
  }

  function eventItem(ev, withStep) {
    var li = doc.createElement("li");
    li.className = "ev fresh ev-" + ev.type.replace(/\./g, "-") + (ev.level ? " lvl-" + ev.level.toLowerCase() : "");
    li.setAttribute("data-seq", ev.seq);
    var t = doc.createElement("time");
    t.setAttribute("datetime", ev.time);
    t.textContent = clock(ev.time);
    li.appendChild(t);
    li.appendChild(doc.createTextNode(" "));
    if (ev.step && withStep) {
      var a = doc.createElement("a");
      a.href = "#step-" + ev.step; a.className = "evstep"; a.textContent = ev.step;
      li.appendChild(a);
      li.appendChild(doc.createTextNode(" "));
    }
    var ty = doc.createElement("span"); ty.className = "evtype"; ty.textContent = ev.type;
    li.appendChild(ty);
    li.appendChild(doc.createTextNode(" "));
    var m = doc.createElement("span"); m.className = "msg"; m.textContent = ev.message || "";
    li.appendChild(m);
    if (ev.data) {
      var keys = Object.keys(ev.data).sort(), parts = [];
      for (var i = 0; i < keys.length; i++) {
        var v = ev.data[keys[i]];
        parts.push(keys[i] + "=" + (typeof v === "string" ? v : JSON.stringify(v)));
      }
      var kv = doc.createElement("span"); kv.className = "kv-inline"; kv.textContent = parts.join(" ");
      li.appendChild(doc.createTextNode(" "));
      li.appendChild(kv);
    }
    return li;
  }

  function append(listId, ev) {
    var list = doc.getElementById(listId);
    if (!list || list.querySelector('[data-seq="' + ev.seq + '"]')) return;
    var stick = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
    list.appendChild(eventItem(ev, listId === "log-all"));
    if (stick) list.scrollTop = list.scrollHeight;
  }

  // offPage reports whether step is a for_each item on another page of
  // its step's items than the one shown.
  function offPage(step) {
    var m = /^(.*)\[(\d+)\]$/.exec(step);
    if (!m) return false;
    var box = doc.querySelector('[data-items-of="' + m[1].replace(/["\\]/g, "") + '"]');
    if (!box) return false;
    var i = Number(m[2]);
    return i < Number(box.getAttribute("data-items-from")) || i >= Number(box.getAttribute("data-items-to"));
  }

  // A step the address points at (#step-ID) shows its output unfolded.
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && doc.getElementById(id);
    if (!el || !el.hasAttribute("data-step")) return;
    var body = el.querySelector("details.step-body");
    if (body && !body.open) { body.open = true; body.setAttribute("data-user", ""); }
  }

  function followRun(box) {
    var id = box.getAttribute("data-run-id");
    var after = box.getAttribute("data-after") || "0";
    var outAfter = Number(box.getAttribute("data-output-after") || "0");
    var es = new EventSource("/runs/" + encodeURIComponent(id) + "/live?after=" + encodeURIComponent(after) +
      "&output_after=" + encodeURIComponent(String(outAfter)));
    var pending = null, inflight = false, again = false;
    var lineWaits = false; // a line came for a step without its block
    var waiting = []; // seqs received since the last refresh started

    function refresh() {
      if (inflight) { again = true; return; }
      inflight = true;
      var covered = waiting;
      waiting = [];
      lineWaits = false;
      fetchPage().then(function (html) {
        var upTo = swapRegions(html);
        var now = Date.now();
        for (var i = 0; i < covered.length; i++) if (seen[covered[i]]) seen[covered[i]].refreshed = now;
        // Events that came while the page was fetched are in it when the
        // server read them (the fresh page's data-after): no second fetch
        // for them.
        waiting = waiting.filter(function (seq) {
          if (seq > upTo) return true;
          if (seen[seq]) seen[seq].refreshed = now;
          return false;
        });
        if (!waiting.length && !lineWaits) again = false;
        root.setAttribute("data-refreshed", String(now));
      }).catch(function () { markLost(); }).then(function () {
        inflight = false;
        if (again) { again = false; refresh(); }
      });
    }

    function schedule() {
      if (pending) return;
      pending = setTimeout(function () { pending = null; refresh(); }, 100);
    }

    function onEvent(e) {
      var ev;
      try { ev = JSON.parse(e.data); } catch (err) { return; }
      var all = doc.getElementById("log-all");
      if (!ev.step || !all || !all.hasAttribute("data-run-only")) append("log-all", ev);
      var q = box.getAttribute("data-q");
      if (ev.step && (!q || String(ev.message || "").toLowerCase().indexOf(q.toLowerCase()) >= 0)) append("log-" + ev.step, ev);
      seen[ev.seq] = { type: ev.type, shown: Date.now() };
      waiting.push(ev.seq);
      root.setAttribute("data-last-seq", String(ev.seq));
      if (ev.type !== "log") schedule();
    }

    // A line a step printed goes under the step as text; a step without
    // its block yet gets it from the next refresh of the page.
    es.addEventListener("output", function (e) {
      var l;
      try { l = JSON.parse(e.data); } catch (err) { return; }
      if (l.seq <= outAfter) return;
      outAfter = l.seq;
      var q = box.getAttribute("data-q");
      if (q && String(l.text).toLowerCase().indexOf(q.toLowerCase()) < 0) return; // not a line the search shows
      var pre = doc.getElementById("output-" + l.step);
      if (!pre && offPage(l.step)) return;
      if (!pre) { lineWaits = true; schedule(); return; }
      var span = doc.createElement("span");
      span.className = "out-" + l.stream;
      span.textContent = l.text;
      pre.appendChild(span);
      pre.appendChild(doc.createTextNode("\n"));
      var count = pre.closest("details") && pre.closest("details").querySelector("[data-lines]");
      if (count) count.textContent = String(pre.querySelectorAll("span").length);
    });
    for (var i = 0; i < eventTypes.length; i++) es.addEventListener(eventTypes[i], onEvent);
    es.onmessage = onEvent;
    es.addEventListener("end", function () {
      es.close();
      refresh();
      var l = doc.querySelectorAll("[data-live-label]");
      for (var j = 0; j < l.length; j++) l[j].remove();
    });
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED) markLost();
    };
  }

  // ---- keyboard ----
  var gPressed = 0;
  var goKeys = { r: "/runs", p: "/playbooks", a: "/approvals", d: "/deliveries", s: "/schedules", h: "/health" };

  function rows() {
    var list = doc.querySelectorAll("[data-nav=rows] tbody tr.row, section[data-step]");
    return Array.prototype.slice.call(list);
  }

  function move(delta) {
    var all = rows();
    if (!all.length) return;
    var cur = all.findIndex(function (r) { return r.classList.contains("selected"); });
    var next = Math.max(0, Math.min(all.length - 1, cur < 0 ? (delta > 0 ? 0 : all.length - 1) : cur + delta));
    if (cur >= 0) all[cur].classList.remove("selected");
    all[next].classList.add("selected");
    all[next].scrollIntoView({ block: "nearest" });
    if (all[next].tagName === "SECTION") all[next].focus({ preventScroll: true });
  }

  function open() {
    var sel = doc.querySelector(".row.selected, section[data-step].selected");
    if (!sel) return;
    if (sel.tagName === "SECTION") { location.hash = sel.id; return; }
    var href = sel.getAttribute("data-href");
    if (href) location.href = href;
  }

  function help(show) {
    var h = doc.getElementById("help");
    if (!h) return;
    h.hidden = !show;
    if (show) doc.getElementById("help-close").focus();
  }

  doc.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var tag = e.target.tagName;
    if (e.key === "Escape") { help(false); return; }
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || e.target.isContentEditable) return;
    if (gPressed && Date.now() - gPressed < 1500 && goKeys[e.key]) { gPressed = 0; location.href = goKeys[e.key]; return; }
    gPressed = 0;
    switch (e.key) {
      case "g": gPressed = Date.now(); break;
      case "j": move(1); break;
      case "k": move(-1); break;
      case "Enter": if (tag !== "A" && tag !== "BUTTON" && tag !== "SUMMARY") open(); break;
      case "t": toggleTimes(); break;
      case "?": help(true); break;
      case "/":
        var f = doc.querySelector("[data-filter], .filters input, .filters select");
        if (f) {
          e.preventDefault();
          var folded = f.closest("details");
          if (folded) folded.open = true;
          f.focus();
        }
        break;
      default: return;
    }
  });

  doc.addEventListener("click", function (e) {
    var sum = e.target.closest && e.target.closest("summary");
    if (sum && sum.parentElement) sum.parentElement.setAttribute("data-user", "");
    if (e.target.id === "time-mode") toggleTimes();
    if (e.target.id === "help-close" || e.target.id === "help") help(false);
  });

  doc.addEventListener("submit", function (e) {
    var msg = e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) e.preventDefault();
  });

  function init() {
    renderTimes();
    openTarget();
    // On a phone the list's filters start folded, so that the list is on
    // the first screen.
    if (window.matchMedia && window.matchMedia("(max-width: 640px)").matches) {
      var fold = doc.querySelectorAll("details[data-fold-narrow]");
      for (var i = 0; i < fold.length; i++) fold[i].open = false;
    }
    window.addEventListener("hashchange", openTarget);
    setInterval(renderTimes, 30000);
    setInterval(since, 1000);
    var box = doc.getElementById("run");
    if (box && box.hasAttribute("data-follow") && window.EventSource) followRun(box);
    startLists();
  }
  if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", init); else init();
})();
