// Trace viewer (docs/ui.md "Timeline"): mounts itself on every `<div class="trace-viewer"
// data-run=R data-t0=A data-t1=B>` that Dash renders (a MutationObserver; nothing happens on other
// pages), lays the tracks out in groups (collapsible, pinnable), turns input into view changes
// drawn at the next animation frame from cached tiles (never waiting for the server), keeps the
// view in the URL (history.replaceState) and exposes window.scprofTrace for tests and the
// benchmark.
(function () {
  "use strict";
  var lib = (window.scprofTraceLib = window.scprofTraceLib || {});
  var RH = 18, AX = 26, GH = 20, LW = 230;

  function qs() { return new URLSearchParams(window.location.search); }
  function num(v) { var n = Number(v); return v != null && v !== "" && isFinite(n) ? n : null; }
  function list(v) { return v ? v.split(",").filter(function (s) { return s !== ""; }) : []; }
  function getJSON(url) {
    return fetch(url, { credentials: "same-origin" }).then(function (r) {
      return r.json().then(function (b) { if (!r.ok) throw new Error(b.error || "HTTP " + r.status); return b; });
    });
  }

  function Viewer(root) {
    this.root = root;
    this.run = root.getAttribute("data-run");
    this.attrT0 = Number(root.getAttribute("data-t0"));
    this.attrT1 = Number(root.getAttribute("data-t1"));
    this.ui = lib.build(root);
    var p = qs();
    this.V = {
      ctx: this.ui.canvas.getContext("2d"), RH: RH, AX: AX, x0: LW, W: 800, H: 400, dpr: 1,
      t0: num(p.get("t0")) != null ? num(p.get("t0")) : num(root.getAttribute("data-t0")),
      t1: num(p.get("t1")) != null ? num(p.get("t1")) : num(root.getAttribute("data-t1")),
      rows: [], rowOfTrack: {}, trackOf: {}, marks: new Set(), markList: [], selId: null, flows: [], area: null, measure: null,
      scrollTop: AX, pinnedH: 0, level: 0, scale: 1,
    };
    this.selId = num(p.get("sel"));
    this.findQ = p.get("find") || "";
    this.hl = p.get("hl") || "";
    this.collapsedParam = p.has("collapsed") ? list(p.get("collapsed")) : null;
    this.pinned = list(p.get("pinned")).map(Number);
    this.mode = "pan";
    this.inputs = [];
    this.stats = { first_view_ms: null, frames: [], exact_ms: null, exact: false, tiles_requested: 0 };
    this.ready = false;
    this.alive = true;
    this.found = { id: [], track: [], start: [], dur: [], count: 0, k: -1 };
    this.hlFound = null;
    this.mouse = null;
    this.start();
  }

  Viewer.prototype.start = function () {
    var self = this;
    getJSON("/api/trace/meta?run=" + encodeURIComponent(this.run)).then(function (meta) {
      if (!self.alive) return;
      self.meta = meta;
      self.tracks = {};
      meta.tracks.forEach(function (t) { self.tracks[t.id] = t; });
      self.V.trackOf = self.tracks;
      if (!meta.tracks.length) return self.showEmpty("This run has no timeline tracks: no events or step markers were recorded.");
      var span = Math.max(1, meta.last_ps - meta.first_ps);
      if (self.V.t0 == null || self.V.t1 == null || !(self.V.t1 > self.V.t0)) { self.V.t0 = meta.first_ps; self.V.t1 = meta.first_ps + span; }
      var groups = meta.groups || [];
      self.collapsed = new Set(self.collapsedParam != null ? self.collapsedParam :
        (meta.tracks.length > 40 ? groups.slice(1).filter(function (g) { return g.id !== "host"; }).map(function (g) { return g.id; }) : []));
      self.pinned = self.pinned.filter(function (t) { return self.tracks[t]; });
      self.V.tiles = self.tiles = new lib.TileStore(self.run, meta, function () { self.dirtyLayout = true; self.request(null); });
      self.wire();
      self.resize();
      if (self.findQ) { self.ui.find.value = self.findQ; self.runFind(self.findQ, 0); }
      if (self.hl) self.runHighlight();
      if (self.selId != null) self.select({ id: self.selId }, true);
    }).catch(function (e) { self.showEmpty("The trace could not be loaded: " + e.message); });
  };

  Viewer.prototype.showEmpty = function (text) {
    this.ui.empty.textContent = text;
    this.ui.empty.hidden = false;
    this.ui.scroll.hidden = true;
    this.ready = true;
    this.stats.first_view_ms = performance.now();
  };

  // ---- layout: groups and tracks, pinned tracks under the axis -----------------------------------
  Viewer.prototype.trackH = function (t) {
    return 4 + RH * ((this.tiles.trackDepth[t.id] || 0) + 1);  // rows grow with the nesting seen
  };

  Viewer.prototype.layout = function () {
    var self = this, V = this.V, rows = [], y = 0, pinnedH = 0, pinned = new Set(this.pinned);
    this.pinned.forEach(function (tid) {
      var t = self.tracks[tid], h = self.trackH(t);
      rows.push({ kind: "track", tid: tid, label: t.label, h: h, pinned: true, cy: AX + pinnedH });
      pinnedH += h;
    });
    (this.meta.groups || []).forEach(function (g) {
      var collapsed = self.collapsed.has(g.id);
      var grow = { kind: "group", gid: g.id, label: g.label, h: GH, collapsed: collapsed, n: g.tracks.length, cy: y };
      rows.push(grow);
      y += GH;
      g.tracks.forEach(function (tid) {
        var t = self.tracks[tid];
        if (!t) return;
        if (collapsed) { if (!pinned.has(tid)) V.rowOfTrack[tid] = grow; return; }
        if (pinned.has(tid)) return;
        var label = t.group && t.label.indexOf(t.group + " · ") === 0 ? t.label.slice(t.group.length + 3) : t.label;
        rows.push({ kind: "track", tid: tid, label: label, h: self.trackH(t), pinned: false, cy: y });
        y += self.trackH(t);
      });
    });
    V.rows = rows;
    V.pinnedH = pinnedH;
    V.scrollTop = AX + pinnedH;
    this.contentH = y;
    var viewH = Math.max(240, Math.min(window.innerHeight - 150, AX + pinnedH + y + 2));
    if (viewH !== V.H) { V.H = viewH; this.sizeCanvas(); }
    this.ui.spacer.style.height = Math.max(0, AX + pinnedH + y - viewH) + "px";
    this.place();
  };

  // Screen positions for the scroll offset; which rows are visible.
  Viewer.prototype.place = function () {
    var V = this.V, sy = this.ui.scroll.scrollTop;
    V.rowOfTrack = V.rowOfTrack || {};
    V.rows.forEach(function (r) {
      r.sy = r.pinned ? r.cy : V.scrollTop + r.cy - sy;
      var top = r.pinned ? AX : V.scrollTop;
      r.vis = r.sy + r.h > top && r.sy < V.H;
      if (r.kind === "track") V.rowOfTrack[r.tid] = r;
    });
    var self = this;
    (this.meta.groups || []).forEach(function (g) {
      if (!self.collapsed.has(g.id)) return;
      var grow = V.rows.filter(function (r) { return r.kind === "group" && r.gid === g.id; })[0];
      g.tracks.forEach(function (tid) { if (self.pinned.indexOf(tid) < 0) V.rowOfTrack[tid] = grow; });
    });
  };

  Viewer.prototype.sizeCanvas = function () {
    var V = this.V, c = this.ui.canvas;
    V.dpr = window.devicePixelRatio || 1;
    c.style.width = V.W + "px";
    c.style.height = V.H + "px";
    c.width = Math.round(V.W * V.dpr);
    c.height = Math.round(V.H * V.dpr);
    this.ui.scroll.style.height = V.H + "px";
  };

  Viewer.prototype.resize = function () {
    var w = Math.max(480, Math.floor(this.ui.scroll.clientWidth || this.root.clientWidth || 800));
    if (w !== this.V.W) { this.V.W = w; this.sizeCanvas(); }
    this.dirtyLayout = true;
    this.request(null);
  };

  // ---- frames ----------------------------------------------------------------------------------
  // Ask for a frame; `ev` (an input event) is timed from its timeStamp to the end of that frame.
  Viewer.prototype.request = function (ev) {
    if (ev) this.inputs.push(ev.timeStamp != null ? ev.timeStamp : performance.now());
    if (this.raf) return;
    var self = this;
    this.raf = requestAnimationFrame(function () { self.raf = 0; self.frame(); });
  };

  Viewer.prototype.clampView = function () {
    var V = this.V, m = this.meta, span = Math.max(1, m.last_ps - m.first_ps), w = V.t1 - V.t0;
    w = Math.max(Math.min(w, span * 4), 1000);  // at least 1 ns shown, at most 4 runs
    var lo = m.first_ps - span * 0.5, hi = m.last_ps + span * 0.5;
    var t0 = Math.max(lo, Math.min(V.t0, hi - w));
    V.t0 = Math.max(0, t0); V.t1 = V.t0 + w;
  };

  Viewer.prototype.frame = function () {
    if (!this.alive || !this.meta) return;
    var V = this.V;
    if (this.dirtyLayout) { this.dirtyLayout = false; this.layout(); } else this.place();
    this.clampView();
    V.scale = (V.W - V.x0) / (V.t1 - V.t0);
    V.level = lib.levelFor(V.t0, V.t1, V.W - V.x0, this.tiles.maxLevel);
    V.selId = this.selId;
    var res = lib.drawFrame(V);
    this.stats.drawn = (this.stats.drawn || 0) + 1;
    this.drawMarks();
    var now = performance.now();
    for (var i = 0; i < this.inputs.length; i++) this.stats.frames.push(now - this.inputs[i]);
    this.inputs = [];
    if (res.complete) {
      if (this.stats.first_view_ms == null) { this.stats.first_view_ms = now; this.ready = true; }
      // after a zoom or pan: the time until the view is complete, and exact (not aggregated)
      if (this.zoomAt != null) {
        this.stats.complete_ms = now - this.zoomAt;
        this.stats.exact_ms = res.exact ? now - this.zoomAt : null;
        this.zoomAt = null;
      }
    }
    this.stats.exact = res.exact;
    this.complete = res.complete;
    this.ui.status.textContent = (res.complete ? "" : "loading… · ") + (res.exact ? "exact events" : "aggregated: each pixel column in its dominant op's colour") +
      " · " + lib.fmtTime(V.t1 - V.t0) + " shown";
    this.wantTiles();
    this.saveURL();
  };

  // Matches of find / highlight as ticks under the axis (they show even where slices aggregate).
  Viewer.prototype.drawMarks = function () {
    var V = this.V, ctx = V.ctx, lists = [this.found, this.hlFound].filter(Boolean);
    ctx.fillStyle = "#d50000";
    lists.forEach(function (f) {
      for (var i = 0; i < f.start.length; i++) {
        var x = V.x0 + (f.start[i] - V.t0) * V.scale;
        if (x < V.x0 || x > V.W) continue;
        ctx.fillRect(x, AX - 5, Math.max(2, f.dur[i] * V.scale), 4);
      }
    });
  };

  Viewer.prototype.visibleTracks = function () {
    return this.V.rows.filter(function (r) { return r.kind === "track" && r.vis; }).map(function (r) { return r.tid; });
  };

  // The tiles this view wants: the needed level (visible first, one tile each side next), then
  // the whole run at a coarse level to fall back on when zooming out.
  Viewer.prototype.wantTiles = function () {
    var V = this.V, tracks = this.visibleTracks(), k = V.level, wants = [], seen = new Set(), tiles = this.tiles;
    if (!tracks.length) return tiles.want([]);
    function add(k2, i) { var key = k2 + ":" + i; if (!seen.has(key)) { seen.add(key); wants.push({ k: k2, i: i, tracks: tracks }); } }
    tiles.tilesFor(k, V.t0, V.t1, 0).forEach(function (i) { add(k, i); });
    tiles.tilesFor(k, V.t0, V.t1, 1).forEach(function (i) { add(k, i); });
    var ko = lib.levelFor(this.meta.first_ps, this.meta.last_ps, V.W - V.x0, tiles.maxLevel);
    if (ko > k) tiles.tilesFor(ko, this.meta.first_ps, this.meta.last_ps + 1, 0).forEach(function (i) { add(ko, i); });
    tiles.want(wants);
  };

  // ---- URL state ---------------------------------------------------------------------------------
  Viewer.prototype.saveURL = function () {
    var self = this;
    clearTimeout(this.urlTimer);
    this.urlTimer = setTimeout(function () {
      if (!self.alive) return;
      var p = qs(), V = self.V;
      function put(k, v) { if (v === null || v === "" || v === undefined) p.delete(k); else p.set(k, v); }
      put("t0", String(Math.round(V.t0)));
      put("t1", String(Math.round(V.t1)));
      put("sel", self.selId != null ? String(self.selId) : null);
      put("find", self.findQ || null);
      put("hl", self.hl || null);
      put("collapsed", Array.from(self.collapsed).join(","));
      if (!self.collapsed.size) p.set("collapsed", "");
      put("pinned", self.pinned.join(",") || null);
      var url = window.location.pathname + "?" + p.toString();
      if (url !== window.location.pathname + window.location.search) window.history.replaceState(window.history.state, "", url);
    }, 120);
  };

  // ---- view changes ------------------------------------------------------------------------------
  Viewer.prototype.zoom = function (factor, x, ev) {
    var V = this.V, at = V.t0 + (Math.max(V.x0, x) - V.x0) / V.scale;
    V.t0 = at - (at - V.t0) * factor;
    V.t1 = at + (V.t1 - at) * factor;
    this.viewChanged(ev);
    this.request(ev);
  };
  Viewer.prototype.pan = function (dt, ev) { this.V.t0 += dt; this.V.t1 += dt; this.viewChanged(ev); this.request(ev); };
  // A zoom or pan at `ev`: stats.complete_ms / exact_ms will time the view until it is complete / exact.
  Viewer.prototype.viewChanged = function (ev) {
    this.zoomAt = ev && ev.timeStamp != null ? ev.timeStamp : performance.now();
    this.stats.exact_ms = null;
  };
  Viewer.prototype.zoomTo = function (t0, t1) {
    this.V.t0 = t0; this.V.t1 = t1;
    this.viewChanged(null);
    this.request({ timeStamp: performance.now() });
  };

  lib.Viewer = Viewer;
  lib.RH = RH; lib.AX = AX; lib.GH = GH;
})();
