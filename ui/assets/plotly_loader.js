/* Plotly for the UI's graphs: plotly.js built with the trace types the UI draws (scatter, bar,
 * heatmap, histogram; ui/assets/vendor/README.md): 1.2 MB against the cartesian bundle's 1.5 MB and
 * the full one's 4.8 MB. Its first line asks chromium to compile it while it streams in, off the
 * main thread: its run there takes about 40 ms (230-260 ms without the hint, 670-720 ms for the
 * cartesian bundle, 1.5-1.7 s for the full one).
 *
 * dcc.Graph waits on `Promise.resolve(window.Plotly || <load the full bundle>)` when it first
 * mounts. Here window.Plotly is, until the bundle has run, a getter giving a promise of it; the
 * bundle's own `window.Plotly = Plotly` replaces the getter. The bundle is run
 * - on first use (any page);
 * - on the pages that draw graphs, as soon as the page's layout is in (downloaded with Dash's own
 *   scripts; run any earlier, it would hold up Dash's own start), and at a click to one: it then
 *   runs while the server renders that page (ui/routing.filled_page) instead of after;
 * - on the Runs, Findings, Tuning and SQL pages, once the page's data has been in for 1 s and the
 *   browser is idle: a click to a graph page made while the user reads the page finds it ready.
 * Graphs out of view are drawn after the first view (drawOffscreenLater). Once the bundle has run
 * ahead (on the pages without graphs), one small plot is drawn out of sight and removed: a page's
 * first plot then finds Plotly's one-time set-up paid (~40 ms: its styles, text measurement, first
 * compiled paths). Should the bundle fail to load, the full bundle that dcc.Graph would have
 * loaded is tried.
 */
(function () {
  "use strict";
  if (window.Plotly) return;
  var here = document.currentScript && document.currentScript.src;
  if (!here) return;
  var src = here.replace(/plotly_loader\.js(\?.*)?$/, "vendor/plotly-scprof.min.js");
  var GRAPH_PAGES = /^\/(overview|memory|sparsecore|compare)\/?$/;
  var pending = null;
  // fn() when the browser is idle (or at `timeout` ms); where there is no requestIdleCallback, soon
  var whenIdle =
    window.requestIdleCallback ||
    function (fn) {
      return setTimeout(fn, 50);
    };

  function script(url) {
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = url;
      s.async = true;
      s.onload = resolve;
      s.onerror = function () {
        reject(new Error("could not load " + url));
      };
      document.head.appendChild(s);
    });
  }

  function loaded() {
    var p = Object.getOwnPropertyDescriptor(window, "Plotly");
    if (p && "value" in p && p.value) return p.value;
    throw new Error("plotly.js did not define window.Plotly");
  }

  // A plot with what the pages' first plots hold (stacked and horizontal bars with text, lines
  // with markers, a legend, axis titles), drawn off-screen and removed.
  function prime(Plotly) {
    if (!document.body) return Plotly;
    var div = document.createElement("div");
    div.style.cssText = "position:absolute;left:-10000px;top:0;width:300px;height:200px;visibility:hidden";
    document.body.appendChild(div);
    var data = [
      { type: "bar", x: [1, 2], y: [1, 2], text: ["a", "b"], textposition: "inside", name: "a" },
      { type: "bar", x: [1], y: ["b"], orientation: "h", xaxis: "x2", yaxis: "y2", name: "b" },
      { type: "scatter", mode: "lines+markers", x: [1, 2], y: [2, 1], name: "c" },
    ];
    var layout = {
      barmode: "stack",
      showlegend: true,
      legend: { orientation: "h" },
      margin: { l: 40, r: 10, t: 10, b: 30 },
      xaxis: { title: { text: "x" }, automargin: true },
      yaxis: { title: { text: "y" }, automargin: true, domain: [0, 0.5] },
      xaxis2: { anchor: "y2" },
      yaxis2: { anchor: "x2", domain: [0.6, 1] },
    };
    function done() {
      Plotly.purge(div);
      div.remove();
    }
    try {
      Promise.resolve(Plotly.newPlot(div, data, layout)).then(done, done);
    } catch (e) {
      div.remove(); // only a head start lost: the pages' plots do the same set-up
    }
    return Plotly;
  }

  // Graphs out of view (below the fold) are first drawn when they come into view or when the
  // page is idle, whichever comes first (one per idle moment, in page order; none once the user
  // has clicked through to another page): a page's first view waits only for the graphs it
  // shows. Plotly.react is what dcc.Graph draws with; it awaits the promise before binding its
  // events, and keeps the graph's `dash-graph--pending` class until then. A graph drawn once is
  // redrawn at once; one unmounted before its turn is never drawn.
  function drawOffscreenLater(Plotly) {
    if (!("IntersectionObserver" in window)) return Plotly;
    var react = Plotly.react;
    var waiting = new Map(); // graph div -> {args, settle: [[resolve, reject], ...]}
    var near = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (e.isIntersecting) draw(e.target);
      });
    });
    var idleAsked = false;

    function drawNextWhenIdle() {
      if (idleAsked || !waiting.size) return;
      idleAsked = true;
      whenIdle(
        function () {
          idleAsked = false;
          dropLeftPages();
          if (waiting.size) draw(waiting.keys().next().value);
          drawNextWhenIdle();
        },
        { timeout: 1500 }
      );
    }

    // Once the user has clicked through to another page, the graphs waiting on the page being left
    // are never drawn (their components are about to go, or to get figures anew): drawing them
    // would hold up the next page. Their promises stay pending; dcc.Graph drops them on unmount.
    function dropLeftPages() {
      waiting.forEach(function (w, gd) {
        if (w.path !== location.pathname) {
          waiting.delete(gd);
          near.unobserve(gd);
        }
      });
    }

    function draw(gd) {
      var w = waiting.get(gd);
      if (!w) return;
      waiting.delete(gd);
      near.unobserve(gd);
      if (w.path !== location.pathname) return; // its page is being left (dropLeftPages)
      var drawn = gd.isConnected ? Promise.resolve().then(function () {
        return react.apply(Plotly, w.args);
      }) : Promise.resolve();
      w.settle.forEach(function (s) {
        drawn.then(s[0], s[1]);
      });
    }

    function outOfView(gd) {
      if (!(gd instanceof Element) || gd._fullLayout) return false;
      var r = gd.getBoundingClientRect();
      return r.top >= window.innerHeight || r.bottom <= 0;
    }

    Plotly.react = function (gd) {
      var args = arguments;
      if (outOfView(gd)) {
        return new Promise(function (resolve, reject) {
          var w = waiting.get(gd) || { settle: [] };
          w.args = args; // the newest figure wins
          w.path = location.pathname;
          w.settle.push([resolve, reject]);
          waiting.set(gd, w);
          near.observe(gd);
          drawNextWhenIdle();
        });
      }
      var w = waiting.get(gd); // a figure still waiting is replaced by this one, drawn now
      if (w) {
        waiting.delete(gd);
        near.unobserve(gd);
      }
      var drawn = react.apply(Plotly, args);
      if (w) {
        w.settle.forEach(function (s) {
          Promise.resolve(drawn).then(s[0], s[1]);
        });
      }
      return drawn;
    };
    return Plotly;
  }

  // `ahead`: run while no graph waits for it (a page without graphs, idle): Plotly's one-time set-up
  // is then paid too; a graph waiting would only wait longer for it.
  function load(ahead) {
    if (!pending) {
      pending = script(src)
        .then(loaded)
        .then(drawOffscreenLater)
        .then(ahead === true ? prime : function (Plotly) {
          return Plotly;
        })
        .catch(function () {
          return window._dashPlotlyJSURL ? script(window._dashPlotlyJSURL).then(loaded) : Promise.reject();
        });
    }
    return pending;
  }

  Object.defineProperty(window, "Plotly", {
    configurable: true,
    enumerable: true,
    get: load,
    set: function (value) {
      Object.defineProperty(window, "Plotly", { value: value, writable: true, configurable: true, enumerable: true });
    },
  });
  // Opened on a page that draws graphs: download the bundle now, alongside Dash's own scripts; it
  // runs when the page's layout is in, from the browser's cache.
  if (GRAPH_PAGES.test(location.pathname)) {
    var hint = document.createElement("link");
    hint.rel = "preload";
    hint.as = "script";
    hint.href = src;
    document.head.appendChild(hint);
  }
  // A click to a graph page (dcc.Link's pushState, the browser's back and forward): the bundle runs
  // while the server renders that page, data included, instead of after it.
  function toGraphPage() {
    if (GRAPH_PAGES.test(location.pathname)) setTimeout(load, 0);
  }
  window.addEventListener("_dashprivate_pushstate", toGraphPage);
  window.addEventListener("popstate", toGraphPage);
  // Graph pages run the bundle as soon as their layout is in. The other pages, but the trace
  // viewer's (whose zooms a 300 ms compile would hold up), run it once their data has been in for
  // AHEAD_AFTER_MS and the browser is idle: a click to a graph page made while the user reads the
  // page then finds it ready, and a click made sooner does not wait for it.
  var IDLE_PAGES = /^\/(runs|findings|tuning|sql)?\/?$/;
  var AHEAD_AFTER_MS = 1000;
  var aheadAsked = false;
  function filled() {
    var bodies = document.querySelectorAll("#page .page-body");
    return (
      bodies.length > 0 &&
      Array.prototype.every.call(bodies, function (b) {
        return b.childElementCount > 0;
      })
    );
  }
  function runAhead() {
    aheadAsked = false;
    if (IDLE_PAGES.test(location.pathname) && filled()) {
      watch.disconnect();
      load(true);
    }
  }
  var watch = new MutationObserver(function () {
    if (GRAPH_PAGES.test(location.pathname) && document.querySelector("#page .page-body")) {
      watch.disconnect();
      setTimeout(load, 0);
    } else if (!aheadAsked && IDLE_PAGES.test(location.pathname) && filled()) {
      aheadAsked = true;
      setTimeout(function () {
        whenIdle(runAhead, { timeout: 5000 });
      }, AHEAD_AFTER_MS);
    }
  });
  watch.observe(document.documentElement, { childList: true, subtree: true });
})();
