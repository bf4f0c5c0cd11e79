// plotly.js's core (which holds the scatter trace) and the other trace types the UI's figures
// use: go.Bar, go.Heatmap, go.Histogram (grep "go\.[A-Z]" ui/). A figure of another type is drawn
// as an empty plot with a console warning: add its module here and rebuild.
'use strict';
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/heatmap'), require('plotly.js/lib/histogram')]);
module.exports = Plotly;
