// Trace viewer, input and what it asks the server: wheel/keys/drag to zoom and pan
// (client-side, drawn at the next frame), hover tooltip, click to select (details and flows),
// find and highlight, area selection and the measure tool; window.scprofTrace for tests and the
// benchmark; and the MutationObserver that mounts a viewer on each `.trace-viewer` div Dash renders.
(function () {
  "use strict";
  var lib = (window.scprofTraceLib = window.scprofTraceLib || {});
  var Viewer = lib.Viewer, P = Viewer.prototype;

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin" }).then(function (r) {
      return r.json().then(function (b) { if (!r.ok) throw new Error(b.error || "HTTP " + r.status); return b; });
    });
  }
  function typing(ev) {
    var t = ev.target, tag = t && t.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (t && t.isContentEditable);
  }

  P.wire = function () {
    var self = this, ui = this.ui, c = ui.canvas;
    this.on(c, "wheel", function (ev) { self.onWheel(ev); }, { passive: false });
    this.on(c, "mousedown", function (ev) { self.onDown(ev); });
    this.on(window, "mousemove", function (ev) { self.onMove(ev); });
    this.on(window, "mouseup", function (ev) { self.onUp(ev); });
    this.on(c, "mouseleave", function () { ui.tooltip.hidden = true; self.mouse = null; });
    this.on(document, "keydown", function (ev) { self.onKey(ev); });
    this.on(window, "resize", function () { self.resize(); });
    this.on(ui.scroll, "scroll", function (ev) { self.request(ev); });
    this.on(ui.modes, "click", function (ev) { var m = ev.target.getAttribute("data-mode"); if (m) self.setMode(m); });
    this.on(ui.find, "keydown", function (ev) {
      if (ev.key !== "Enter") return;
      ev.preventDefault();
      self.stepFind(ev.shiftKey ? -1 : 1, ev);
    });
    this.on(ui.next, "click", function (ev) { self.stepFind(1, ev); });
    this.on(ui.prev, "click", function (ev) { self.stepFind(-1, ev); });
    this.on(ui.zoomIn, "click", function (ev) { self.zoom(0.5, self.V.x0 + (self.V.W - self.V.x0) / 2, ev); });
    this.on(ui.zoomOut, "click", function (ev) { self.zoom(2, self.V.x0 + (self.V.W - self.V.x0) / 2, ev); });
    this.on(ui.whole, "click", function (ev) {
      self.V.t0 = self.meta.first_ps; self.V.t1 = Math.max(self.meta.last_ps, self.meta.first_ps + 1000);
      self.viewChanged(ev); self.request(ev);
    });
    this.setMode("pan");
  };

  P.on = function (target, type, fn, opts) {
    target.addEventListener(type, fn, opts);
    (this.listeners = this.listeners || []).push([target, type, fn, opts]);
  };

  P.destroy = function () {
    this.alive = false;
    (this.listeners || []).forEach(function (l) { l[0].removeEventListener(l[1], l[2], l[3]); });
    if (this.tiles) this.tiles.want([]);
    if (this.raf) cancelAnimationFrame(this.raf);
  };

  P.setMode = function (m) {
    this.mode = m;
    Array.prototype.forEach.call(this.ui.modes.children, function (b) { b.classList.toggle("active", b.getAttribute("data-mode") === m); });
    this.ui.canvas.style.cursor = m === "pan" ? "grab" : "crosshair";
  };

  P.local = function (ev) {
    var r = this.ui.canvas.getBoundingClientRect();
    return { x: ev.clientX - r.left, y: ev.clientY - r.top };
  };
  P.timeAt = function (x) { return this.V.t0 + (x - this.V.x0) / this.V.scale; };

  P.onWheel = function (ev) {
    var p = this.local(ev);
    if (ev.shiftKey) { this.ui.scroll.scrollTop += ev.deltaY || ev.deltaX; ev.preventDefault(); return; }
    ev.preventDefault();
    if (Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) return this.pan((ev.deltaX / (this.V.W - this.V.x0)) * (this.V.t1 - this.V.t0), ev);
    var d = ev.deltaMode === 1 ? ev.deltaY * 30 : ev.deltaY;
    this.zoom(Math.exp(Math.max(-3, Math.min(3, d * 0.0025))), p.x, ev);
  };

  P.onKey = function (ev) {
    if (!this.alive || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "Escape") { this.clearSelection(); this.request(ev); return; }
    if (typing(ev)) return;
    var V = this.V, w = V.t1 - V.t0, mx = this.mouse ? this.mouse.x : V.x0 + (V.W - V.x0) / 2;
    switch (ev.key.toLowerCase()) {
      case "w": this.zoom(0.8, mx, ev); break;
      case "s": this.zoom(1.25, mx, ev); break;
      case "a": this.pan(-0.15 * w, ev); break;
      case "d": this.pan(0.15 * w, ev); break;
      case "1": this.setMode("pan"); break;
      case "2": this.setMode("select"); break;
      case "3": this.setMode("measure"); break;
      default: return;
    }
    ev.preventDefault();
  };

  P.onDown = function (ev) {
    if (ev.button !== 0) return;
    var p = this.local(ev);
    ev.preventDefault();
    this.ui.canvas.focus({ preventScroll: true });
    var tool = ev.shiftKey ? "select" : this.mode;
    this.drag = { x: p.x, y: p.y, t: this.timeAt(p.x), t0: this.V.t0, t1: this.V.t1, tool: tool, moved: false };
    if (tool === "pan") this.ui.canvas.style.cursor = "grabbing";
  };

  P.onMove = function (ev) {
    if (!this.meta || !this.alive) return;
    var p = this.local(ev), d = this.drag, V = this.V;
    var inside = p.x >= 0 && p.y >= 0 && p.x < V.W && p.y < V.H;
    this.mouse = inside ? p : null;
    if (!d) { if (inside) this.hover(p, ev); return; }
    if (Math.abs(p.x - d.x) + Math.abs(p.y - d.y) > 3) d.moved = true;
    if (!d.moved) return;
    this.ui.tooltip.hidden = true;
    var t = this.timeAt(Math.max(V.x0, Math.min(V.W, p.x)));
    if (d.tool === "pan") {
      var dt = ((d.x - p.x) / (V.W - V.x0)) * (d.t1 - d.t0);
      V.t0 = d.t0 + dt; V.t1 = d.t1 + dt;
    } else if (d.tool === "select") {
      V.area = { t0: Math.min(d.t, t), t1: Math.max(d.t, t), tracks: this.tracksBetween(d.y, p.y) };
    } else {
      V.measure = { t0: d.t, t1: t, y: Math.max(V.AX + 20, Math.min(V.H - 4, d.y)) };
    }
    this.request(ev);
  };

  P.onUp = function (ev) {
    var d = this.drag;
    if (!d) return;
    this.drag = null;
    this.setMode(this.mode);
    var p = this.local(ev);
    if (!d.moved) return this.click(p, ev);
    if (d.tool === "select" && this.V.area) this.areaQuery(this.V.area);
  };

  // Tracks whose rows meet the vertical range [ya, yb] (an area selection's tracks).
  P.tracksBetween = function (ya, yb) {
    var lo = Math.min(ya, yb), hi = Math.max(ya, yb), out = new Set(), self = this;
    this.V.rows.forEach(function (r) {
      if (!r.vis || r.sy > hi || r.sy + r.h < lo) return;
      if (r.kind === "track") out.add(r.tid);
      else if (r.collapsed) self.meta.groups.filter(function (g) { return g.id === r.gid; })[0].tracks.forEach(function (t) { out.add(t); });
    });
    return out;
  };

  P.rowAt = function (y) {
    var V = this.V;
    for (var i = 0; i < V.rows.length; i++) {
      var r = V.rows[i];
      if (r.vis && y >= r.sy && y < r.sy + r.h && (r.pinned || y >= V.scrollTop)) return r;
    }
    return null;
  };

  // The slice (or aggregated bucket) under a point, from the cached tiles drawn there.
  P.hit = function (p) {
    var V = this.V, r = this.rowAt(p.y);
    if (!r || r.kind !== "track" || p.x < V.x0) return r ? { row: r } : null;
    var depth = Math.floor((p.y - r.sy - 2) / V.RH), t = this.timeAt(p.x), tol = 2 / V.scale;
    var span = lib.tileSpan(V.level), i = Math.floor(t / span), got = this.tiles.lookup(V.level, i, r.tid), best = null;
    got.parts.forEach(function (part) {
      var ev = part.ev;
      for (var j = 0; j < ev.n; j++) {
        if (ev.depth[j] !== depth || ev.start[j] - tol > t || ev.start[j] + ev.dur[j] + tol < t) continue;
        if (!best || ev.dur[j] < best.dur) best = { id: ev.id[j], start: ev.start[j], dur: ev.dur[j], name: ev.name[j], step: ev.step ? ev.step[j] : -1 };
      }
      if (!best && part.bk) {
        var bk = part.bk, b = Math.floor((t - bk.t0) / bk.w);
        for (var m = 0; m < bk.n; m++) if (bk.b[m] === b && bk.row[m] === depth) best = { bucket: true, start: bk.t0 + b * bk.w, dur: bk.w, name: bk.name[m], busy: bk.busy[m], count: bk.count[m] };
      }
    });
    return { row: r, ev: best };
  };

  P.hover = function (p, ev) {
    var h = this.hit(p), tip = this.ui.tooltip, f = lib.fmtTime;
    if (!h || !h.ev) {
      tip.hidden = true;
      this.ui.canvas.title = h && h.row && h.row.kind === "group" ? "click to collapse or expand" :
        h && h.row && p.x < this.V.x0 ? (h.row.pinned ? "click to unpin" : "click to pin under the axis") : "";
      return;
    }
    this.ui.canvas.title = "";
    var e = h.ev, name = this.tiles.name(e.name);
    var lines = e.bucket
      ? [name + " (most time in this column)", e.count.toLocaleString("en-US") + " events starting here, busy " + f(e.busy, 3) + " of " + f(e.dur, 3), "start " + f(e.start, 7)]
      : [name, "start " + f(e.start, 7), "duration " + f(e.dur, 4)];
    lib.showTooltip(tip, ev.clientX, ev.clientY, lines);
  };

  P.click = function (p, ev) {
    var h = this.hit(p), self = this;
    if (h && h.row && h.row.kind === "group") {
      var g = h.row.gid;
      if (this.collapsed.has(g)) this.collapsed.delete(g); else this.collapsed.add(g);
      this.dirtyLayout = true;
      return this.request(ev);
    }
    if (h && h.row && h.row.kind === "track" && p.x < this.V.x0) {
      var i = this.pinned.indexOf(h.row.tid);
      if (i >= 0) this.pinned.splice(i, 1); else this.pinned.push(h.row.tid);
      this.dirtyLayout = true;
      return this.request(ev);
    }
    if (this.V.area || this.V.measure) { this.V.area = null; this.V.measure = null; this.ui.area.hidden = true; }
    if (h && h.ev && !h.ev.bucket) {
      if (h.ev.step >= 0 || h.ev.id < 0) this.selectStep(h.ev, h.row.tid);
      else this.select(h.ev);
    } else this.clearSelection();
    self.request(ev);
  };

  P.clearSelection = function () {
    this.selId = null; this.V.flows = []; this.V.area = null; this.V.measure = null;
    this.ui.details.hidden = true; this.ui.area.hidden = true;
  };

  // Select a slice: its details (every field and argument) and its flows, fetched in the background.
  P.select = function (e, keepView) {
    var self = this, id = e.id;
    this.selId = id;
    this.V.flows = [];
    var q = "?run=" + encodeURIComponent(this.run);
    getJSON("/api/trace/event" + q + "&id=" + id).then(function (info) {
      if (self.selId !== id) return;
      var t = self.tracks[info.track];
      lib.showDetails(self.ui.details, info, t ? t.label : String(info.track), lib.fmtTime, function () { self.clearSelection(); self.request(null); });
      return getJSON("/api/trace/flows" + q + "&event=" + id).then(function (res) {
        if (self.selId !== id) return;
        self.V.flows = res.flows || [];
        self.flowNote(self.V.flows.length);
        self.request(null);
      });
    }).catch(function (err) {
      if (self.selId !== id) return;
      self.ui.details.hidden = false;
      self.ui.details.textContent = "Event " + id + ": " + err.message;
    });
    this.request(null);
  };

  P.flowNote = function (n) {
    var note = lib.el("p", { className: "muted tv-flow-note", text: n ? n + " flow" + (n === 1 ? "" : "s") + " drawn (arrows from a source's end to its destination's start)" : "No flows touch this selection." });
    var old = this.ui.details.querySelector(".tv-flow-note");
    if (old) old.remove();
    this.ui.details.appendChild(note);
  };

  // Select a step marker: the step's flows (all of them), and its time span in the details.
  P.selectStep = function (e, tid) {
    var self = this, step = e.step;
    this.selId = null;
    this.V.flows = [];
    var t = this.tracks[tid];
    lib.showDetails(this.ui.details, { name: "step " + step, start_ps: e.start, dur_ps: e.dur, fields: [["step", String(step)]] },
      t ? t.label : String(tid), lib.fmtTime, function () { self.clearSelection(); self.request(null); });
    getJSON("/api/trace/flows?run=" + encodeURIComponent(this.run) + "&step=" + step).then(function (res) {
      self.V.flows = res.flows || [];
      self.flowNote(self.V.flows.length);
      self.request(null);
    }).catch(function (err) { console.warn("scprof trace flows:", err.message); });
  };

  // ---- find and highlight ------------------------------------------------------------------------
  P.setMarks = function () {
    var m = new Set();
    [this.found, this.hlFound].forEach(function (f) { if (f) f.id.forEach(function (i) { m.add(i); }); });
    this.V.marks = m;
  };

  P.runFind = function (q, dir, ev) {
    var self = this;
    this.findQ = q;
    if (!q) { this.found = { id: [], start: [], dur: [], track: [], count: 0, k: -1 }; this.ui.count.textContent = ""; this.setMarks(); return this.request(ev); }
    this.ui.count.textContent = "searching…";
    var tracks = this.meta.tracks.map(function (t) { return t.id; }).join(",");
    getJSON("/api/trace/find?run=" + encodeURIComponent(this.run) + "&q=" + encodeURIComponent(q) + "&tracks=" + tracks).then(function (res) {
      if (self.findQ !== q) return;
      var ev0 = res.ev || {};
      self.found = { q: q, id: ev0.id || [], start: ev0.start || [], dur: ev0.dur || [], track: ev0.track || [], count: res.count || 0, k: -1 };
      self.setMarks();
      if (dir) self.stepFind(dir, null); else self.showCount();
      self.request(null);
    }).catch(function (err) { self.ui.count.textContent = err.message; });
  };

  P.showCount = function () {
    var f = this.found, n = f.count;
    this.ui.count.textContent = n ? (f.k >= 0 ? f.k + 1 : "–") + " of " + n.toLocaleString("en-US") + (n > f.id.length ? " (first " + f.id.length.toLocaleString("en-US") + " marked)" : "") : "no match";
  };

  P.stepFind = function (dir, ev) {
    var q = this.ui.find.value.trim();
    if (q !== (this.found.q || "") || q !== this.findQ) return this.runFind(q, dir, ev);
    var f = this.found, n = f.id.length;
    if (!n) return this.showCount();
    f.k = f.k < 0 ? (dir > 0 ? 0 : n - 1) : (f.k + dir + n) % n;
    this.showCount();
    this.reveal(f.track[f.k], f.start[f.k], f.dur[f.k], ev);
  };

  // Centre the view on a slice (wider if it does not fit) and scroll its track into view.
  P.reveal = function (tid, start, dur, ev) {
    var V = this.V, w = V.t1 - V.t0;
    if (dur > 0.8 * w) w = dur * 1.25;
    var mid = start + dur / 2;
    V.t0 = mid - w / 2; V.t1 = mid + w / 2;
    var t = this.tracks[tid];
    if (t && this.pinned.indexOf(tid) < 0) {
      var g = (this.meta.groups || []).filter(function (x) { return x.tracks.indexOf(tid) >= 0; })[0];
      if (g && this.collapsed.has(g.id)) { this.collapsed.delete(g.id); this.layout(); }
      var r = V.rows.filter(function (x) { return x.kind === "track" && x.tid === tid; })[0];
      if (r) {
        var sc = this.ui.scroll, viewH = V.H - V.scrollTop;
        if (r.cy < sc.scrollTop || r.cy + r.h > sc.scrollTop + viewH) sc.scrollTop = Math.max(0, r.cy - viewH / 3);
      }
    }
    this.viewChanged(ev);
    this.request(ev || { timeStamp: performance.now() });
  };

  P.runHighlight = function () {
    var self = this, V = this.V;
    var url = "/api/trace/highlight?run=" + encodeURIComponent(this.run) + "&t0=" + Math.round(V.t0) + "&t1=" + Math.round(V.t1) + "&hl=" + encodeURIComponent(this.hl);
    getJSON(url).then(function (res) {
      var e = res.ev || {};
      self.hlFound = { id: e.id || [], start: e.start || [], dur: e.dur || [], track: e.track || [], count: res.count || 0 };
      self.setMarks();
      self.ui.count.textContent = (res.count || 0).toLocaleString("en-US") + " slices highlighted by the finding";
      self.request(null);
    }).catch(function (err) { self.ui.count.textContent = "highlight: " + err.message; });
  };

  // ---- area selection ------------------------------------------------------------------------
  P.areaQuery = function (a) {
    var self = this, tracks = Array.from(a.tracks);
    if (!tracks.length || !(a.t1 > a.t0)) return;
    var t0 = Math.round(a.t0), t1 = Math.round(a.t1);
    this.areaPending = getJSON("/api/trace/area?run=" + encodeURIComponent(this.run) + "&t0=" + t0 + "&t1=" + t1 + "&tracks=" + tracks.join(","))
      .then(function (res) {
        if (self.V.area !== a) return res;
        self.lastArea = res;
        lib.showArea(self.ui.area, res, tracks.length, lib.fmtTime, lib.colorOf, function () { self.V.area = null; self.request(null); });
        return res;
      }).catch(function (err) { self.ui.area.hidden = false; self.ui.area.textContent = "Area: " + err.message; });
    return this.areaPending;
  };

  // ---- the API for tests and the benchmark -----------------------------------------------------
  P.api = function () {
    var self = this, V = this.V;
    return {
      get ready() { return self.ready; },
      stats: self.stats,
      view: function () { return { t0: V.t0, t1: V.t1, level: V.level }; },
      runSpan: function () { return self.meta.last_ps - self.meta.first_ps; },
      zoomTo: function (t0, t1) { self.zoomTo(t0, t1); },
      idle: function () { return !!self.meta && self.complete && self.tiles.busy() === 0 && !self.raf; },
      colorAt: function (x, y) {
        var d = V.ctx.getImageData(Math.floor(x * V.dpr), Math.floor(y * V.dpr), 1, 1).data;
        return "#" + [d[0], d[1], d[2]].map(function (v) { return (v < 16 ? "0" : "") + v.toString(16); }).join("");
      },
      colorOf: lib.colorOf,
      xOf: function (t) { return V.x0 + (t - V.t0) * V.scale; },
      rows: function () { return V.rows.map(function (r) { return { kind: r.kind, tid: r.tid, gid: r.gid, y: r.sy, h: r.h, vis: r.vis, pinned: !!r.pinned, collapsed: !!r.collapsed }; }); },
      trackY: function (tid, depth) { var r = V.rowOfTrack[tid]; return r ? r.sy + 2 + (depth || 0) * V.RH + (V.RH - 2) / 2 : null; },
      flows: function () { return V.flows; },
      selected: function () { return self.selId; },
      select: function (id) { self.select({ id: id }); },
      find: function () { return { q: self.found.q, count: self.found.count, k: self.found.k, ids: self.found.id }; },
      area: function () { return self.lastArea || null; },
      measure: function () { return V.measure ? { t0: V.measure.t0, t1: V.measure.t1 } : null; },
      areaTracks: function () { return V.area ? Array.from(V.area.tracks) : []; },
      marks: function () { return Array.from(V.marks); },
      canvas: self.ui.canvas,
    };
  };

  // ---- mounting --------------------------------------------------------------------------------
  var viewers = [];
  function scan() {
    viewers = viewers.filter(function (v) { if (document.body.contains(v.root)) return true; v.destroy(); return false; });
    var roots = document.querySelectorAll(".trace-viewer");
    for (var i = 0; i < roots.length; i++) {
      var root = roots[i];
      var had = root.__scprofViewer;
      if (had && root.getAttribute("data-run") === had.run) {
        var a0 = Number(root.getAttribute("data-t0")), a1 = Number(root.getAttribute("data-t1"));
        if ((a0 !== had.attrT0 || a1 !== had.attrT1) && a1 > a0) { had.attrT0 = a0; had.attrT1 = a1; had.zoomTo(a0, a1); }
        continue;
      }
      if (root.__scprofViewer) { root.__scprofViewer.destroy(); viewers = viewers.filter(function (v) { return v.root !== root; }); }
      var v = new Viewer(root);
      root.__scprofViewer = v;
      viewers.push(v);
      window.scprofTrace = v.api();
    }
  }
  var pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    setTimeout(function () { pending = false; scan(); }, 0);
  }
  function observe() {
    new MutationObserver(function (muts) {
      for (var i = 0; i < muts.length; i++) if (muts[i].addedNodes.length || muts[i].removedNodes.length || muts[i].type === "attributes") return schedule();
    }).observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ["data-run", "data-t0", "data-t1"] });
    scan();
  }
  if (document.body) observe(); else document.addEventListener("DOMContentLoaded", observe);
})();
