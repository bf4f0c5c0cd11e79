/* Plotly for the UI's graphs: the cartesian bundle (ui/assets/vendor/README.md), 1.5 MB against
 * the full bundle's 4.8 MB, loaded early on the pages that draw graphs.
 *
 * dcc.Graph waits on `Promise.resolve(window.Plotly || <load the full bundle>)` when it first
 * mounts. Here window.Plotly is, until the bundle has run, a getter giving a promise of it: the
 * bundle is fetched on first use (any page), or, on the pages that draw graphs, as soon as the
 * page's layout is in (its data callbacks then on their way to the server), so that its download
 * and compile overlap the server's work instead of following it (loaded any earlier, its compile
 * would hold up Dash's own start). The bundle's own `window.Plotly = Plotly` replaces the getter.
 * Should it fail to load, the full bundle that dcc.Graph would have loaded is tried.
 */
(function () {
  "use strict";
  if (window.Plotly) return;
  var here = document.currentScript && document.currentScript.src;
  if (!here) return;
  var src = here.replace(/plotly_loader\.js(\?.*)?$/, "vendor/plotly-cartesian.min.js");
  var GRAPH_PAGES = /^\/(overview|memory|sparsecore|compare)\/?$/;
  var pending = null;

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

  function load() {
    if (!pending) {
      pending = script(src)
        .then(loaded)
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
  var watch = new MutationObserver(function () {
    if (GRAPH_PAGES.test(location.pathname) && document.querySelector("#page .page-body")) {
      watch.disconnect();
      setTimeout(load, 0);
    }
  });
  watch.observe(document.documentElement, { childList: true, subtree: true });
})();
