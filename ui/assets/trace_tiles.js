// Trace viewer, tiles: which resolution level a view needs, the tile cache per
// (level, tile, track), background fetching of /api/trace/tile with a cap on concurrent requests
// and cancellation of tiles no longer wanted, and the lookup that draws every frame from what is
// cached (a coarser or finer cached tile while the needed one loads). No drawing here.
(function () {
  "use strict";
  var lib = (window.scprofTraceLib = window.scprofTraceLib || {});
  var BUCKETS = 1024;
  var MAX_INFLIGHT = 4;

  function pow2(k) { return Math.pow(2, k); }
  function tileSpan(k) { return pow2(k + 10); }

  // The level a view needs: a bucket is at most one CSS pixel.
  function levelFor(t0, t1, widthPx, maxLevel) {
    var per = (t1 - t0) / Math.max(1, widthPx);
    var k = per >= 1 ? Math.floor(Math.log2(per)) : 0;
    return Math.max(0, Math.min(k, maxLevel));
  }

  // Nesting rows of a track's events: an event's row is the number of events that contain it
  // (a stack sweep in start order), so `train` > `next_batch` are two rows. Containers overlap
  // every tile their children overlap, so a slice gets the same row in every tile that holds it.
  function depths(start, dur, id) {
    var n = start.length, out = new Int16Array(n), stack = [], order = new Array(n);
    for (var i = 0; i < n; i++) order[i] = i;
    order.sort(function (a, b) { return start[a] - start[b] || dur[b] - dur[a] || id[a] - id[b]; });
    for (var j = 0; j < n; j++) {
      var e = order[j], end = start[e] + dur[e];
      while (stack.length && stack[stack.length - 1] < end) stack.pop();
      out[e] = stack.length;
      if (dur[e] > 0) stack.push(end);
    }
    return out;
  }

  function columns(ev) {
    ev = ev || {};
    var n = (ev.start || []).length;
    return {
      n: n,
      id: Float64Array.from(ev.id || []),
      start: Float64Array.from(ev.start || []),
      dur: Float64Array.from(ev.dur || []),
      name: Int32Array.from(ev.name || []),
      step: ev.step ? Int32Array.from(ev.step.map(function (v) { return v == null ? -1 : v; })) : null,
    };
  }

  // One track's part of a tile, ready to draw: events with their nesting rows; for an aggregated
  // tile also the buckets (start time, dominant name, busy share, row under the long events).
  function prepare(k, i, raw) {
    var ev = columns(raw.ev);
    ev.depth = depths(ev.start, ev.dur, ev.id);
    var maxDepth = 0;
    for (var j = 0; j < ev.n; j++) if (ev.depth[j] > maxDepth) maxDepth = ev.depth[j];
    var t = { k: k, i: i, mode: raw.mode === "agg" ? "agg" : "exact", ev: ev, bk: null, maxDepth: ev.n ? maxDepth : 0 };
    if (raw.bk && raw.bk.b && raw.bk.b.length) {
      var w = pow2(k), t0 = i * tileSpan(k), nb = raw.bk.b.length;
      var row = new Int16Array(BUCKETS);
      for (var e = 0; e < ev.n; e++) {  // a bucket sits under the long events covering it
        var b0 = Math.max(0, Math.floor((ev.start[e] - t0) / w));
        var b1 = Math.min(BUCKETS - 1, Math.floor((ev.start[e] + ev.dur[e] - 1 - t0) / w));
        for (var b = b0; b <= b1; b++) if (row[b] < ev.depth[e] + 1) row[b] = ev.depth[e] + 1;
      }
      var bk = { n: nb, b: Int32Array.from(raw.bk.b), name: Int32Array.from(raw.bk.name),
        busy: Float64Array.from(raw.bk.busy), count: Int32Array.from(raw.bk.n || []), row: new Int16Array(nb), w: w, t0: t0 };
      for (var m = 0; m < nb; m++) {
        bk.row[m] = row[bk.b[m]];
        if (bk.row[m] > t.maxDepth) t.maxDepth = bk.row[m];
      }
      t.bk = bk;
    }
    return t;
  }

  // The cache and loader of one run's tiles.
  function TileStore(run, meta, onLoaded) {
    this.run = run;
    this.meta = meta;
    this.maxLevel = meta.max_level == null ? 40 : meta.max_level;
    this.names = {};           // name id -> name (ids are the run's)
    this.cache = new Map();    // "k:i:track" -> prepared tile part
    this.inflight = new Map(); // request id -> {key: "k:i", tracks: Set, ctrl: AbortController}
    this.seq = 0;
    this.queue = [];           // [{k, i, tracks: [...]}] wanted, not yet asked, most urgent first
    this.onLoaded = onLoaded;  // called after a tile arrives (the viewer redraws)
    this.trackDepth = {};      // track -> deepest nesting row seen in any loaded tile
    this.errors = 0;
  }

  TileStore.prototype.get = function (k, i, track) { return this.cache.get(k + ":" + i + ":" + track); };
  TileStore.prototype.name = function (id) { var n = this.names[id]; return n == null ? "#" + id : n; };

  // Tiles covering [t0, t1) at level k (indices), plus `pad` each side.
  TileStore.prototype.tilesFor = function (k, t0, t1, pad) {
    var span = tileSpan(k);
    var a = Math.max(0, Math.floor(t0 / span) - (pad || 0)), b = Math.floor(Math.max(t0, t1 - 1) / span) + (pad || 0);
    var last = Math.floor(Math.max(0, this.meta.last_ps) / span);
    b = Math.min(b, last);
    var out = [];
    for (var i = a; i <= b; i++) out.push(i);
    return out;
  };

  // Say which tiles the view wants (most urgent first): queued requests no longer wanted are
  // dropped, requests in flight for tiles no longer wanted are aborted, the rest are asked for.
  TileStore.prototype.asked = function (key, t) {
    var found = false;
    this.inflight.forEach(function (fly) { if (fly.key === key && fly.tracks.has(t)) found = true; });
    return found;
  };

  TileStore.prototype.want = function (wants) {
    var self = this, keep = new Set(), queue = [];
    wants.forEach(function (w) {
      var key = w.k + ":" + w.i;
      keep.add(key);
      var missing = w.tracks.filter(function (t) { return !self.cache.has(key + ":" + t) && !self.asked(key, t); });
      if (missing.length) queue.push({ k: w.k, i: w.i, tracks: missing });
    });
    this.inflight.forEach(function (fly, id) {
      if (!keep.has(fly.key)) { fly.ctrl.abort(); self.inflight.delete(id); }
    });
    this.queue = queue;
    this.pump();
  };

  TileStore.prototype.busy = function () { return this.inflight.size + this.queue.length; };

  TileStore.prototype.pump = function () {
    while (this.inflight.size < MAX_INFLIGHT && this.queue.length) {
      var w = this.queue.shift();
      for (var c = 0; c < w.tracks.length; c += 256) this.fetch(w.k, w.i, w.tracks.slice(c, c + 256));
    }
  };

  TileStore.prototype.fetch = function (k, i, tracks) {
    var self = this, ctrl = new AbortController(), id = ++this.seq;
    var fly = { key: k + ":" + i, tracks: new Set(tracks), ctrl: ctrl };
    this.inflight.set(id, fly);
    var url = "/api/trace/tile?run=" + this.run + "&k=" + k + "&i=" + i + "&tracks=" + tracks.join(",");
    fetch(url, { signal: ctrl.signal, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(new Error("tile " + r.status)); })
      .then(function (data) {
        var names = data.names || {};
        for (var nid in names) self.names[nid] = names[nid];
        var parts = data.tracks || {};
        tracks.forEach(function (t) {
          var part = prepare(k, i, parts[String(t)] || { mode: "exact", ev: {} });
          self.cache.set(k + ":" + i + ":" + t, part);
          if ((self.trackDepth[t] || 0) < part.maxDepth) self.trackDepth[t] = part.maxDepth;
        });
      })
      .catch(function (e) { if (e.name !== "AbortError") { self.errors++; console.warn("scprof trace:", e.message); } })
      .then(function () {
        self.inflight.delete(id);
        self.pump();
        self.onLoaded();
      });
  };

  // What to draw for track `t` over tile `i` of level `k`: the tile itself when cached, else the
  // finer tiles covering it (one or two levels down, all cached), else the nearest coarser cached
  // tile. Returns a list of prepared parts (possibly empty) and whether they are the needed level.
  TileStore.prototype.lookup = function (k, i, t) {
    var hit = this.get(k, i, t);
    if (hit) return { parts: [hit], exact: true };
    for (var d = 1; d <= 2 && k - d >= 0; d++) {
      var n = 1 << d, parts = [];
      for (var c = 0; c < n; c++) {
        var p = this.get(k - d, i * n + c, t);
        if (!p) { parts = null; break; }
        parts.push(p);
      }
      if (parts) return { parts: parts, exact: false };
    }
    for (var up = 1; k + up <= this.maxLevel; up++) {
      var q = this.get(k + up, Math.floor(i / (1 << Math.min(up, 30))), t);
      if (q) return { parts: [q], exact: false };
    }
    return { parts: [], exact: false };
  };

  lib.BUCKETS = BUCKETS;
  lib.tileSpan = tileSpan;
  lib.levelFor = levelFor;
  lib.depths = depths;
  lib.TileStore = TileStore;
})();
