// Trace viewer, drawing: stable colours by op name, time formatting and axis ticks,
// and one frame of the canvas (axis, group headers, sticky track names, slices with labels and
// nesting rows, aggregated buckets in their dominant op's colour, highlights, flows, selections).
// Everything is drawn from the tile cache (trace_tiles.js); nothing here waits for the server.
(function () {
  "use strict";
  var lib = (window.scprofTraceLib = window.scprofTraceLib || {});
  var STEP_COLOR = "#9e9e9e";
  var STEP_NAME = /^step -?\d+$/;  // a step marker's name (ui/trace_api.py)
  var FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";

  // ---- colours: the same function as ui/colors.py op_color -----------------------------------
  function fnv1a(name) {
    var bytes = new TextEncoder().encode(name), h = 0x811c9dc5;
    for (var i = 0; i < bytes.length; i++) { h ^= bytes[i]; h = Math.imul(h, 0x01000193) >>> 0; }
    return h >>> 0;
  }
  function hex2(v) { var s = Math.round(v * 255).toString(16); return s.length < 2 ? "0" + s : s; }
  function hslHex(hue, sat, light) {
    var s = sat / 100, l = light / 100;
    var c = (1 - Math.abs(2 * l - 1)) * s, hp = hue / 60, x = c * (1 - Math.abs((hp % 2) - 1)), m = l - c / 2;
    var rgb = hp < 1 ? [c, x, 0] : hp < 2 ? [x, c, 0] : hp < 3 ? [0, c, x] : hp < 4 ? [0, x, c] : hp < 5 ? [x, 0, c] : [c, 0, x];
    return "#" + hex2(rgb[0] + m) + hex2(rgb[1] + m) + hex2(rgb[2] + m);
  }
  var colorCache = new Map();
  function colorOf(name) {
    var c = colorCache.get(name);
    if (c === undefined) {
      var h = fnv1a(name);
      c = hslHex(h % 360, 55 + ((h >>> 9) % 16), 45 + ((h >>> 13) % 16));
      colorCache.set(name, c);
    }
    return c;
  }
  function inkOn(hex) {  // text colour readable on a fill
    var r = parseInt(hex.substr(1, 2), 16), g = parseInt(hex.substr(3, 2), 16), b = parseInt(hex.substr(5, 2), 16);
    return 0.299 * r + 0.587 * g + 0.114 * b > 150 ? "#111" : "#fff";
  }

  // ---- time ----------------------------------------------------------------------------------
  var UNITS = [[1e12, "s"], [1e9, "ms"], [1e6, "µs"], [1e3, "ns"], [1, "ps"]];
  function unitFor(ps) { for (var i = 0; i < UNITS.length; i++) if (Math.abs(ps) >= UNITS[i][0]) return UNITS[i]; return UNITS[4]; }
  function trim(s) { return s.indexOf(".") < 0 ? s : s.replace(/0+$/, "").replace(/\.$/, ""); }
  // A time in its unit with `digits` significant digits ("1.5 µs", "982 µs").
  function fmtTime(ps, digits) {
    if (!ps) return "0 ps";
    var u = unitFor(ps), v = ps / u[0];
    return trim(v.toPrecision(Math.max(digits || 3, Math.floor(Math.log10(Math.abs(v))) + 1))) + " " + u[1];
  }
  function niceStep(raw) {
    var p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  // Axis ticks over [t0, t1): about one per `px` pixels at round steps, labelled in the step's unit.
  // Deep in a long run ("29205000 µs") the labels count from a base instead ("+500 µs" after
  // 29.205 s, as Perfetto does): out.base is that base (0: labels are times from the run's origin).
  function ticks(t0, t1, widthPx, px) {
    var step = niceStep(Math.max(1, ((t1 - t0) / Math.max(1, widthPx)) * (px || 110)));
    var u = unitFor(step), dec = Math.max(0, -Math.floor(Math.log10(step / u[0]) + 1e-9));
    var base = Math.abs(t0) / step > 10000 ? Math.floor(t0 / (10 * step)) * 10 * step : 0;
    var out = [];
    for (var t = Math.ceil(t0 / step) * step; t < t1; t += step) {
      out.push([t, (base ? "+" : "") + ((t - base) / u[0]).toFixed(dec) + " " + u[1]]);
    }
    out.base = base;
    out.baseLabel = base ? fmtTime(base, Math.floor(Math.log10(Math.abs(base))) - Math.floor(Math.log10(10 * step)) + 1) : "";
    return out;
  }

  // ---- text fitting --------------------------------------------------------------------------
  var widthCache = new Map();
  function textWidth(ctx, s) {
    var w = widthCache.get(s);
    if (w === undefined) { w = ctx.measureText(s).width; if (widthCache.size > 20000) widthCache.clear(); widthCache.set(s, w); }
    return w;
  }
  function fit(ctx, s, maxPx) {
    if (maxPx < 14) return "";
    if (textWidth(ctx, s) <= maxPx) return s;
    var n = Math.floor((s.length * maxPx) / textWidth(ctx, s)) - 1;
    while (n > 0 && textWidth(ctx, s.slice(0, n) + "…") > maxPx) n--;
    return n > 0 ? s.slice(0, n) + "…" : "";
  }

  // ---- rectangles: adjacent rects of one colour on one row merge into one ----------------------
  function Painter(ctx) { this.ctx = ctx; this.c = null; this.x0 = 0; this.x1 = -1; this.y = 0; this.h = 0; this.n = 0; }
  // Narrow pieces (buckets, sub-pixel slices) merge; a slice wider than 3 px stays one rect with
  // a 1 px gap at its end, so two neighbours of one name (or two step markers) stay apart.
  Painter.prototype.add = function (x0, x1, y, h, color) {
    // whole pixels, at least one: crisp edges, no colour blended from neighbours; instants and
    // sub-pixel slices stay visible
    if (x1 - x0 < 1) { x0 = Math.floor(x0); x1 = x0 + 1; } else { x0 = Math.round(x0); x1 = Math.max(x0 + 1, Math.round(x1)); }
    var narrow = x1 - x0 < 3;
    if (narrow && color === this.c && y === this.y && x0 <= this.x1 + 0.5 && this.narrow) { if (x1 > this.x1) this.x1 = x1; if (h > this.h) this.h = h; return; }
    if (narrow && y === this.y && x1 <= this.x1 + 0.01 && x1 - x0 <= 1) return;  // a pixel already painted
    this.flush();
    this.c = color; this.x0 = x0; this.x1 = x1; this.y = y; this.h = h; this.narrow = narrow;
  };
  Painter.prototype.flush = function () {
    if (this.c === null) return;
    var w = this.x1 - this.x0;
    this.ctx.fillStyle = this.c;
    this.ctx.fillRect(this.x0, this.y, w > 4 && !this.narrow ? w - 1 : w, this.h);
    this.c = null; this.x1 = -1; this.n++;
  };

  // One prepared tile part of one track, clamped to the x range [xa, xb): slices in their name's
  // colour on their nesting row, buckets (aggregated tiles) in their dominant name's colour with
  // height by busy share; labels of slices wide enough collected into `labels`.
  function drawPart(V, part, y, xa, xb, painter, labels, hits, seen) {
    var ev = part.ev, scale = V.scale, x0v = V.x0, t0 = V.t0, RH = V.RH, store = V.tiles;
    var tmin = t0 + (xa - x0v) / scale, tmax = t0 + (xb - x0v) / scale;
    if (part.bk) {
      // One pixel column (per nesting row) shows its dominant bucket: the one with the most busy
      // time (a bucket is 0.5-1 px at the level drawn), in that bucket's dominant name's colour;
      // wider buckets (a coarser tile standing in while a finer one loads) cover their pixels.
      var bk = part.bk, open = {};
      var emit = function (o) {
        var j = o.j, share = Math.min(1, bk.busy[j] / bk.w), hh = Math.max(3, Math.round((RH - 2) * Math.max(0.35, share)));
        var ry = y + 2 + bk.row[j] * RH, bn = store.name(bk.name[j]);  // step markers grey, as when drawn whole
        painter.add(o.a, o.b, ry + (RH - 2 - hh), hh, part.markers && STEP_NAME.test(bn) ? STEP_COLOR : colorOf(bn));
      };
      for (var j = 0; j < bk.n; j++) {
        var bs = bk.t0 + bk.b[j] * bk.w;
        if (bs + bk.w <= tmin || bs >= tmax) continue;
        var a = Math.round(Math.max(xa, x0v + (bs - t0) * scale)), b = Math.round(Math.min(xb, x0v + (bs + bk.w - t0) * scale));
        if (b <= a) b = a + 1;
        var o = open[bk.row[j]];
        if (o && a < o.b) { if (bk.busy[j] > bk.busy[o.j]) o.j = j; if (b > o.b) o.b = b; continue; }  // same pixel
        if (o) emit(o);
        open[bk.row[j]] = { j: j, a: a, b: b };
      }
      for (var r in open) emit(open[r]);
    }
    for (var i = 0; i < ev.n; i++) {
      var s = ev.start[i], e = s + ev.dur[i];
      if (e < tmin || s >= tmax || (e === tmin && ev.dur[i] > 0)) continue;
      // a slice over several tiles is in each of them: drawn once, whole (one rect, one label)
      var key = ev.id[i] >= 0 ? ev.id[i] : "m" + s;
      if (seen.has(key)) continue;
      seen.add(key);
      var xs = x0v + (s - t0) * scale, xe = x0v + (e - t0) * scale;
      var a2 = Math.max(x0v, xs), b2 = Math.min(V.W, xe), ry2 = y + 2 + ev.depth[i] * RH;
      var nm = store.name(ev.name[i]), isStep = ev.step && ev.step[i] >= 0;
      var col = isStep ? STEP_COLOR : colorOf(nm);
      painter.add(a2, Math.max(b2, a2 + 1), ry2, RH - 2, col);
      if (b2 - a2 >= 24) labels.push([a2, b2, ry2, nm, col]);
      if (hits && (V.marks.has(ev.id[i]) || ev.id[i] === V.selId)) hits.push([Math.max(xs, x0v - 2), Math.min(xe, V.W + 2), ry2, ev.id[i] === V.selId]);
    }
  }

  function drawLabels(ctx, labels, RH) {
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    for (var i = 0; i < labels.length; i++) {
      var l = labels[i], a = Math.max(l[0], 0), text = fit(ctx, l[3], l[1] - a - 6);
      if (!text) continue;
      ctx.fillStyle = inkOn(l[4]);
      ctx.fillText(text, a + 3, l[2] + (RH - 2) / 2 + 0.5);
    }
  }

  // Draws one track's slices over the visible tiles; returns [complete, exact] for this track.
  function drawTrack(V, row, y) {
    var ctx = V.ctx, k = V.level, span = lib.tileSpan(k), painter = new Painter(ctx), labels = [], hits = [], seen = new Set();
    var complete = true, exact = true;
    var idx = V.tiles.tilesFor(k, V.t0, V.t1, 0);
    for (var n = 0; n < idx.length; n++) {
      var i = idx[n], xa = Math.max(V.x0, V.x0 + (i * span - V.t0) * V.scale), xb = Math.min(V.W, V.x0 + ((i + 1) * span - V.t0) * V.scale);
      var got = V.tiles.lookup(k, i, row.tid);
      if (!got.exact) complete = false;
      for (var p = 0; p < got.parts.length; p++) {
        if (got.parts[p].mode !== "exact") exact = false;
        got.parts[p].markers = !!(V.trackOf[row.tid] && V.trackOf[row.tid].steps);
        drawPart(V, got.parts[p], y, xa, xb, painter, labels, hits, seen);
      }
    }
    painter.flush();
    drawLabels(ctx, labels, V.RH);
    for (var h = 0; h < hits.length; h++) {
      var r = hits[h];
      ctx.lineWidth = 2;
      ctx.strokeStyle = r[3] ? "#000" : "#d50000";
      ctx.strokeRect(r[0] - 1, r[2] - 1, Math.max(r[1] - r[0], 2) + 2, V.RH);
    }
    return [complete, exact && complete];
  }

  function drawAxis(V) {
    var ctx = V.ctx;
    ctx.fillStyle = "#eceff1";
    ctx.fillRect(0, 0, V.W, V.AX);
    ctx.strokeStyle = "#b0bec5";
    ctx.beginPath(); ctx.moveTo(0, V.AX - 0.5); ctx.lineTo(V.W, V.AX - 0.5); ctx.stroke();
    ctx.font = FONT; ctx.textBaseline = "middle"; ctx.fillStyle = "#37474f";
    var tk = ticks(V.t0, V.t1, V.W - V.x0, 110);
    for (var i = 0; i < tk.length; i++) {
      var x = Math.round(V.x0 + (tk[i][0] - V.t0) * V.scale) + 0.5;
      ctx.fillRect(x - 0.5, V.AX - 6, 1, 6);
      if (x + 3 + textWidth(ctx, tk[i][1]) < V.W - 2) ctx.fillText(tk[i][1], x + 3, V.AX / 2 - 2);
    }
    ctx.fillStyle = "#546e7a";
    ctx.fillText(fmtTime(V.t1 - V.t0) + " shown" + (tk.base ? " · from " + tk.baseLabel : ""), 6, V.AX / 2 - 2);
    return tk;
  }

  function drawGrid(V, tk, top) {
    var ctx = V.ctx;
    ctx.fillStyle = "rgba(0,0,0,0.06)";
    for (var i = 0; i < tk.length; i++) ctx.fillRect(Math.round(V.x0 + (tk[i][0] - V.t0) * V.scale), top, 1, V.H - top);
  }

  // Where a flow's end sits: its track's row (or its collapsed group's header), clamped to the area.
  function anchorY(V, end) {
    var row = V.rowOfTrack[end.track];
    if (!row) return null;
    var y = row.sy + (row.kind === "group" ? row.h / 2 : 2 + (V.RH - 2) / 2);
    var lo = row.pinned ? V.AX : V.scrollTop;
    return Math.max(lo + 4, Math.min(V.H - 4, y));
  }

  function drawFlows(V) {
    var ctx = V.ctx;
    ctx.save();
    ctx.beginPath(); ctx.rect(V.x0, V.AX, V.W - V.x0, V.H - V.AX); ctx.clip();
    ctx.lineWidth = 1.5;
    for (var i = 0; i < V.flows.length; i++) {
      var f = V.flows[i], ya = anchorY(V, f.src), yb = anchorY(V, f.dst);
      if (ya === null || yb === null) continue;
      var xa = V.x0 + (f.src.start + f.src.dur - V.t0) * V.scale, xb = V.x0 + (f.dst.start - V.t0) * V.scale;
      var col = f.kind === "host->device" ? "#6a1b9a" : f.kind === "tc_bwd->sc_bwd" ? "#e65100" : "#1565c0";
      ctx.strokeStyle = col; ctx.fillStyle = col;
      var dx = Math.max(20, Math.min(80, Math.abs(xb - xa) / 2));
      ctx.beginPath(); ctx.moveTo(xa, ya); ctx.bezierCurveTo(xa + dx, ya, xb - dx, yb, xb, yb); ctx.stroke();
      ctx.beginPath(); ctx.moveTo(xb, yb); ctx.lineTo(xb - 7, yb - 4); ctx.lineTo(xb - 7, yb + 4); ctx.closePath(); ctx.fill();
      ctx.beginPath(); ctx.arc(xa, ya, 2.5, 0, 2 * Math.PI); ctx.fill();
    }
    ctx.restore();
  }

  function drawOverlays(V) {
    var ctx = V.ctx, a, b;
    if (V.area) {  // the area selection: its time range over its tracks
      a = V.x0 + (V.area.t0 - V.t0) * V.scale; b = V.x0 + (V.area.t1 - V.t0) * V.scale;
      ctx.save(); ctx.beginPath(); ctx.rect(V.x0, V.AX, V.W - V.x0, V.H - V.AX); ctx.clip();
      ctx.fillStyle = "rgba(33,150,243,0.15)"; ctx.strokeStyle = "#1565c0"; ctx.lineWidth = 1;
      V.rows.forEach(function (r) {
        if (r.kind === "track" && V.area.tracks.has(r.tid) && r.vis) ctx.fillRect(a, r.sy, b - a, r.h);
      });
      ctx.strokeRect(a + 0.5, V.AX + 0.5, b - a, V.H - V.AX - 1);
      ctx.restore();
    }
    if (V.measure) {
      a = V.x0 + (V.measure.t0 - V.t0) * V.scale; b = V.x0 + (V.measure.t1 - V.t0) * V.scale;
      var y = V.measure.y, text = fmtTime(Math.abs(V.measure.t1 - V.measure.t0), 4);
      ctx.strokeStyle = "#000"; ctx.fillStyle = "rgba(255,235,59,0.25)"; ctx.lineWidth = 1;
      ctx.fillRect(Math.min(a, b), V.AX, Math.abs(b - a), V.H - V.AX);
      ctx.beginPath(); ctx.moveTo(a, V.AX); ctx.lineTo(a, V.H); ctx.moveTo(b, V.AX); ctx.lineTo(b, V.H);
      ctx.moveTo(a, y); ctx.lineTo(b, y); ctx.stroke();
      ctx.font = "bold " + FONT; ctx.textBaseline = "bottom";
      var w = textWidth(ctx, text) + 8, mx = (a + b) / 2 - w / 2;
      ctx.fillStyle = "#fff"; ctx.fillRect(mx, y - 17, w, 15); ctx.strokeRect(mx, y - 17, w, 15);
      ctx.fillStyle = "#000"; ctx.fillText(text, mx + 4, y - 3);
    }
  }

  function drawNames(V) {
    var ctx = V.ctx;
    ctx.font = FONT; ctx.textBaseline = "middle";
    V.rows.forEach(function (r) {
      if (!r.vis) return;
      var top = r.pinned ? V.AX : V.scrollTop;
      ctx.save(); ctx.beginPath(); ctx.rect(0, top, V.W, V.H - top); ctx.clip();
      if (r.kind === "group") {
        ctx.fillStyle = "#cfd8dc"; ctx.fillRect(0, r.sy, V.W, r.h);
        ctx.fillStyle = "#263238"; ctx.font = "bold " + FONT;
        ctx.fillText((r.collapsed ? "▸ " : "▾ ") + r.label + (r.collapsed ? "  (" + r.n + " tracks)" : ""), 6, r.sy + r.h / 2);
        ctx.font = FONT;
      } else {
        ctx.fillStyle = r.pinned ? "#fffde7" : "#fafafa"; ctx.fillRect(0, r.sy, V.x0, r.h);
        ctx.fillStyle = "#37474f";
        ctx.fillText(fit(ctx, (r.pinned ? "📌 " : "") + r.label, V.x0 - 14), 14, r.sy + 2 + (V.RH - 2) / 2);
        ctx.fillStyle = "#e0e0e0"; ctx.fillRect(0, r.sy + r.h - 1, V.W, 1);
      }
      ctx.restore();
    });
    ctx.fillStyle = "#b0bec5"; ctx.fillRect(V.x0 - 1, V.AX, 1, V.H - V.AX);
    if (V.pinnedH) { ctx.fillStyle = "#90a4ae"; ctx.fillRect(0, V.scrollTop - 2, V.W, 2); }
  }

  // One frame. Returns {complete: every visible tile of the needed level drawn, exact: and all
  // of them exact events}.
  function drawFrame(V) {
    var ctx = V.ctx;
    ctx.setTransform(V.dpr, 0, 0, V.dpr, 0, 0);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, V.W, V.H);
    var complete = true, exact = true;
    var tk = ticks(V.t0, V.t1, V.W - V.x0, 110);
    drawGrid(V, tk, V.AX);
    V.rows.forEach(function (r) {
      if (!r.vis || r.kind !== "track") return;
      var top = r.pinned ? V.AX : V.scrollTop;
      ctx.save(); ctx.beginPath(); ctx.rect(V.x0, top, V.W - V.x0, V.H - top); ctx.clip();
      var got = drawTrack(V, r, r.sy);
      ctx.restore();
      complete = complete && got[0]; exact = exact && got[1];
    });
    drawNames(V);
    drawOverlays(V);
    drawFlows(V);
    drawAxis(V);
    return { complete: complete, exact: exact };
  }

  lib.STEP_COLOR = STEP_COLOR;
  lib.colorOf = colorOf;
  lib.fmtTime = fmtTime;
  lib.ticks = ticks;
  lib.niceStep = niceStep;
  lib.drawFrame = drawFrame;
})();
