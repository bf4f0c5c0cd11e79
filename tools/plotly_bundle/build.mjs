// Bundles entry.js the way plotly.js builds its dist bundles (its esbuild-config.js: an IIFE
// named Plotly, minified, global = window), wrapped as its dist files are, with the same header
// naming the version; writes ui/assets/vendor/plotly-scprof.min.js.
import { build } from 'esbuild';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { version } = require('plotly.js/package.json');
const out = new URL('../../ui/assets/vendor/plotly-scprof.min.js', import.meta.url).pathname;
// The first line is V8's explicit compile hint (Chrome 136+): chromium compiles the bundle's
// functions on the thread that streams the script in, instead of one by one on the page's main
// thread as they are first called (its main-thread run: 230-260 ms without, about 40 ms with).
const banner = `//# allFunctionsCalledOnLoad
/**
* plotly.js (scprof: scatter, bar, heatmap, histogram - minified) v${version}
* Copyright 2012-2026, Plotly, Inc.
* All rights reserved.
* Licensed under the MIT license
*/
(
 function(root, factory) {
  if (typeof module === "object" && module.exports) {
   module.exports = factory();
  } else {
   root.moduleName = factory();
  }
} (typeof self !== "undefined" ? self : this, () => {`;

await build({
  entryPoints: [new URL('entry.js', import.meta.url).pathname],
  outfile: out,
  format: 'iife',
  globalName: 'Plotly',
  bundle: true,
  minify: true,
  target: 'es2016',
  define: { global: 'window', 'define.amd': 'false', 'process.env.NODE_DEBUG': 'false' },
  // registry.js requires maplibre-gl's stylesheet for map subplots, which this bundle has none of
  loader: { '.css': 'empty' },
  alias: { regl: '@plotly/regl', stream: 'stream-browserify' },
  banner: { js: banner },
  footer: { js: '\nwindow.Plotly = Plotly;\nreturn Plotly;\n}));' },
  logLevel: 'info',
});
