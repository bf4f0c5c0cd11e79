// Trace viewer, the DOM around the canvas: the toolbar (tool modes, find box, zoom
// buttons, status), the hover tooltip, the details panel of a selected slice (GET
// /api/trace/event) and the area selection's table per name (GET /api/trace/area). Names and
// arguments are data: always set as text, never as markup.
(function () {
  "use strict";
  var lib = (window.scprofTraceLib = window.scprofTraceLib || {});

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "className") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }

  // The viewer's skeleton inside its mount div; returns the parts the viewer wires up.
  function build(root) {
    root.textContent = "";
    var modes = el("span", { className: "tv-modes", role: "group", "aria-label": "tool" }, [
      el("button", { "data-mode": "pan", title: "pan: drag to move, click to select (key 1)", text: "1 pan" }),
      el("button", { "data-mode": "select", title: "area selection: drag over tracks and time (key 2, or Shift+drag)", text: "2 select" }),
      el("button", { "data-mode": "measure", title: "measure: drag between two points (key 3)", text: "3 measure" }),
    ]);
    var find = el("input", { className: "tv-find", type: "search", placeholder: "find by name (Enter, Shift+Enter)", "aria-label": "find by name", maxlength: "200" });
    var prev = el("button", { className: "tv-prev", title: "previous match (Shift+Enter)", text: "◀" });
    var next = el("button", { className: "tv-next", title: "next match (Enter)", text: "▶" });
    var count = el("span", { className: "tv-find-count muted" });
    var zoomOut = el("button", { className: "tv-zoom-out", title: "zoom out (S)", text: "−" });
    var zoomIn = el("button", { className: "tv-zoom-in", title: "zoom in (W)", text: "+" });
    var whole = el("button", { className: "tv-whole", title: "show the whole run", text: "whole run" });
    var status = el("span", { className: "tv-status muted" });
    var toolbar = el("div", { className: "tv-toolbar" }, [modes, find, prev, next, count, zoomOut, zoomIn, whole, status]);
    var canvas = el("canvas", { className: "tv-canvas", tabindex: "0", "aria-label": "trace timeline" });
    var spacer = el("div", { className: "tv-spacer" });
    var scroll = el("div", { className: "tv-scroll" }, [canvas, spacer]);
    var tooltip = el("div", { className: "tv-tooltip", role: "tooltip" });
    tooltip.hidden = true;
    var details = el("div", { className: "tv-details card" });
    var area = el("div", { className: "tv-area card" });
    details.hidden = true;
    area.hidden = true;
    var help = el("p", { className: "muted tv-help", text:
      "Wheel or Ctrl+wheel: zoom at the cursor · W/S: zoom · A/D or drag: pan · Shift+wheel: scroll tracks · " +
      "click: details and flows · Shift+drag: area selection · keys 1 pan, 2 select, 3 measure · Esc: clear · " +
      "click a group to collapse it, a track name to pin it under the axis." });
    var empty = el("div", { className: "empty-state tv-empty" });
    empty.hidden = true;
    [toolbar, empty, scroll, tooltip, el("div", { className: "tv-panels" }, [details, area]), help].forEach(function (c) { root.appendChild(c); });
    return { toolbar: toolbar, modes: modes, find: find, prev: prev, next: next, count: count, zoomIn: zoomIn,
      zoomOut: zoomOut, whole: whole, status: status, canvas: canvas, spacer: spacer, scroll: scroll,
      tooltip: tooltip, details: details, area: area, empty: empty };
  }

  function showTooltip(tip, x, y, lines) {
    tip.textContent = "";
    lines.forEach(function (l, i) { tip.appendChild(el(i === 0 ? "b" : "div", { text: l })); });
    tip.hidden = false;
    var w = tip.offsetWidth, vw = document.documentElement.clientWidth;
    var h = tip.offsetHeight, vh = document.documentElement.clientHeight;
    tip.style.left = Math.max(4, Math.min(x + 14, vw - w - 8)) + "px";
    tip.style.top = (y + 16 + h > vh ? y - h - 8 : y + 16) + "px";
  }

  function kvTable(rows) {
    return el("table", { className: "kv" }, [el("tbody", {}, rows.map(function (r) {
      return el("tr", {}, [el("td", { className: "muted", text: r[0] }), el("td", { className: "num", text: String(r[1]) })]);
    }))]);
  }

  function close(panel, onClose) {
    var b = el("button", { className: "tv-close", title: "close (Esc)", text: "×" });
    b.addEventListener("click", function () { panel.hidden = true; if (onClose) onClose(); });
    return b;
  }

  // The details of a selected slice: name, track, start, duration, end, then every typed field
  // and argument the server formatted with units.
  function showDetails(panel, info, trackLabel, fmt, onClose) {
    panel.textContent = "";
    panel.hidden = false;
    var rows = [["track", trackLabel], ["start", fmt(info.start_ps, 7)], ["duration", fmt(info.dur_ps, 4)],
      ["end", fmt(info.start_ps + info.dur_ps, 7)]];
    (info.fields || []).forEach(function (f) { rows.push([f[0], f[1]]); });
    var args = info.args || [];
    panel.appendChild(close(panel, onClose));
    panel.appendChild(el("h3", { className: "tv-details-name", text: info.name }));
    panel.appendChild(kvTable(rows));
    if (args.length) {
      panel.appendChild(el("h4", { text: "arguments" }));
      panel.appendChild(kvTable(args));
    }
    if (info.flows != null) panel.appendChild(el("p", { className: "muted tv-flow-note", text: info.flows }));
  }

  function pct(x) { return (100 * x).toFixed(x >= 0.1 ? 1 : 2) + " %"; }

  // The area selection's aggregation per name (the server's sums: durations clipped to the window).
  function showArea(panel, res, nTracks, fmt, colorOf, onClose) {
    panel.textContent = "";
    panel.hidden = false;
    panel.appendChild(close(panel, onClose));
    panel.appendChild(el("h3", { text: "Area selection: " + fmt(res.t0, 7) + " – " + fmt(res.t1, 7) +
      " (" + fmt(res.t1 - res.t0, 4) + ") on " + nTracks + " track" + (nTracks === 1 ? "" : "s") }));
    panel.appendChild(el("p", { className: "muted", text:
      "Per name over the events overlapping the window; times are durations clipped to the window, " +
      "summed over the selected tracks; share of the selection's busy time (" + fmt(res.total_ps || 0, 4) + ")." }));
    var head = el("tr", {}, ["name", "count", "total", "mean", "max", "share"].map(function (h, i) {
      return el("th", { className: i ? "num" : "", text: h });
    }));
    var body = el("tbody", {}, (res.rows || []).map(function (r) {
      var sw = el("span", { className: "tv-swatch" });
      sw.style.background = colorOf(r.name);
      return el("tr", {}, [el("td", {}, [sw, r.name]), el("td", { className: "num", text: r.count.toLocaleString("en-US") }),
        el("td", { className: "num", text: fmt(r.total_ps, 4) }), el("td", { className: "num", text: fmt(r.mean_ps, 4) }),
        el("td", { className: "num", text: fmt(r.max_ps, 4) }), el("td", { className: "num", text: pct(r.share) })]);
    }));
    if (!(res.rows || []).length) panel.appendChild(el("p", { className: "muted", text: "No events in this area." }));
    else panel.appendChild(el("div", { className: "table-wrap" }, [el("table", { className: "data tv-area-table" }, [el("thead", {}, [head]), body])]));
  }

  lib.el = el;
  lib.build = build;
  lib.showTooltip = showTooltip;
  lib.showDetails = showDetails;
  lib.showArea = showArea;
})();
