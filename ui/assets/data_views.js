/* Tables and figure cards that travel as data, built here with DOM calls (texts set with
 * textContent: cells and labels are data, never markup). As Dash components (one per cell or
 * card part, ~0.25-0.5 ms each for the renderer on 2 cores), a result of 500 rows x 23 columns
 * took 3.2 s to show; built here, 1.2-1.8 s, the server's query and the browser's layout included.
 *
 * - <table data-table='{"columns": [...], "num": [...], "rows": [[...], ...], "null": "NULL"}'>
 *   (ui/render.py data_table, render.table) is given its head and body: cell texts as the server
 *   formatted them, a null cell as `null`'s text, a number column's cells right-aligned (class
 *   "num"). Optional: "wrap" (columns whose long text wraps, class "wrap"), "cut" (other text
 *   longer than this many characters is cut, whole on hover) and "more_after" (rows after this
 *   many get the class "more-row").
 * - <div data-kpis='[{"label", "value", "detail", "source"}, ...]'> (render.kpis) is given its cards:
 *   <div class="kpi">label<div class="kpi-value">value</div>detail</div>, with a figure's path in
 *   `scprof analyze --json` as data-source and on hover when it has one.
 * Each is rebuilt when its data changes (a new query on the same page, another run).
 */
(function () {
  "use strict";

  function cell(tag, text, num) {
    var el = document.createElement(tag);
    el.textContent = text;
    if (num) el.className = "num";
    return el;
  }

  // An element's data (its attribute `name`, JSON), or null when it has none, has not changed since
  // it was last built from it, or is not JSON.
  function dataOf(el, name) {
    var text = el.getAttribute(name);
    if (!text || el.__scprofBuilt === text) return null;
    el.__scprofBuilt = text;
    try {
      return JSON.parse(text);
    } catch (e) {
      return null;
    }
  }

  function build(table) {
    var spec = dataOf(table, "data-table");
    if (!spec) return;
    var num = spec.num || [];
    var head = document.createElement("thead");
    var tr = document.createElement("tr");
    (spec.columns || []).forEach(function (c, i) {
      tr.appendChild(cell("th", c, num[i]));
    });
    head.appendChild(tr);
    var wrap = spec.wrap || [];
    var cut = spec.cut || 0;
    var moreAfter = typeof spec.more_after === "number" ? spec.more_after : Infinity;
    var body = document.createElement("tbody");
    (spec.rows || []).forEach(function (row, n) {
      var r = document.createElement("tr");
      if (n >= moreAfter) r.className = "more-row";
      row.forEach(function (v, i) {
        var td;
        if (v === null) td = cell("td", spec["null"] || "", false);
        else if (wrap[i]) {
          td = cell("td", v, false);
          td.className = "wrap";
        } else if (cut && !num[i] && v.length > cut) {
          td = cell("td", v.slice(0, cut) + "\u2026", false);
          td.title = v;
        } else td = cell("td", v, num[i]);
        r.appendChild(td);
      });
      body.appendChild(r);
    });
    table.replaceChildren(head, body);
  }

  function buildCards(grid) {
    var cards = dataOf(grid, "data-kpis");
    if (!Array.isArray(cards)) return;
    var els = cards.map(function (c) {
      var card = document.createElement("div");
      card.className = "kpi";
      card.appendChild(document.createTextNode(c.label || ""));
      var value = document.createElement("div");
      value.className = "kpi-value";
      value.textContent = c.value || "";
      card.appendChild(value);
      if (c.detail) card.appendChild(document.createTextNode(c.detail));
      if (c.source) {
        card.setAttribute("data-source", c.source);
        card.title = "scprof analyze --json: figures." + c.source;
      }
      return card;
    });
    grid.replaceChildren.apply(grid, els);
  }

  function scan(node) {
    if (node.nodeType !== 1) return;
    if (node.matches("table[data-table]")) build(node);
    else if (node.matches("div[data-kpis]")) buildCards(node);
    if (node.firstElementChild) {
      node.querySelectorAll("table[data-table]").forEach(build);
      node.querySelectorAll("div[data-kpis]").forEach(buildCards);
    }
  }

  new MutationObserver(function (records) {
    records.forEach(function (r) {
      if (r.type === "attributes") scan(r.target);
      else r.addedNodes.forEach(scan);
    });
  }).observe(document.documentElement, { childList: true, subtree: true, attributes: true, attributeFilter: ["data-table", "data-kpis"] });
  if (document.body) scan(document.body);
})();
