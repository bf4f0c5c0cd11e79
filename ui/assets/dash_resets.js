/* Dash's renderer (4.x) dispatches RESET_COMPONENT_STATE for every component it renders anew, one
 * action per component, and each action gives its store a new state that every rendered
 * component's selectors are run against: a page of N components costs N x N selector runs (about
 * 2 ms per component per view on a busy 2-core machine; the target is every first view within 1 s).
 *
 * The action only drops the store's layoutHashes entries under the component's path; when there
 * is none, it changes nothing but the state's identity. Such actions are not dispatched here:
 * every other action, and every reset that has something to drop, goes through as before. Should
 * a later Dash store its hashes elsewhere (no `layoutHashes` object), every action goes through.
 */
(function () {
  "use strict";
  var RESET = "RESET_COMPONENT_STATE";

  function needed(store, action) {
    if (!action || action.type !== RESET || !action.payload || !Array.isArray(action.payload.itempath)) return true;
    var hashes = store.getState().layoutHashes;
    if (!hashes || typeof hashes !== "object") return true;
    var prefix = action.payload.itempath.join(",");
    for (var key in hashes) {
      if (Object.prototype.hasOwnProperty.call(hashes, key) && key.startsWith(prefix)) return true;
    }
    return false;
  }

  function patch(store) {
    if (!store || typeof store.dispatch !== "function" || store.__scprofResets) return;
    var dispatch = store.dispatch;
    store.dispatch = function (action) {
      return needed(store, action) ? dispatch.apply(this, arguments) : action;
    };
    store.__scprofResets = true;
  }

  if (window.store) {
    patch(window.store);
    return;
  }
  // The renderer publishes its store as window.store when it creates it, before the first render.
  Object.defineProperty(window, "store", {
    configurable: true,
    enumerable: true,
    get: function () {
      return undefined;
    },
    set: function (store) {
      Object.defineProperty(window, "store", { value: store, writable: true, configurable: true, enumerable: true });
      patch(store);
    },
  });
})();
