"""Dash's renderer resets each newly rendered component's state with one store action apiece
(RESET_COMPONENT_STATE); for a component without layout hashes the action changes nothing but the
state's identity, and each such update re-runs every rendered component's selectors: N x N work
for a page of N components (the target: first views within 1 s). ui/assets/dash_resets.js leaves
those actions out: in the browser, no store update of a page's view changes nothing, and the pages
still render and update (the other browser tests)."""

from __future__ import annotations

import pytest

from tests.ui.browserkit import settle

# Counts the store's updates whose only change is a new, equal layoutHashes object.
WATCH = """(() => {
  window.__noop_updates = 0; window.__updates = 0;
  const iv = setInterval(() => {
    const store = window.store; if (!store) return; clearInterval(iv);
    let prev = store.getState();
    store.subscribe(() => {
      const next = store.getState(); window.__updates += 1;
      const changed = Object.keys(next).filter(k => next[k] !== prev[k]);
      if (changed.length === 1 && changed[0] === 'layoutHashes'
          && JSON.stringify(next.layoutHashes) === JSON.stringify(prev.layoutHashes)) window.__noop_updates += 1;
      prev = next;
    });
  }, 0);
})();"""


@pytest.mark.parametrize("path", ["/overview", "/compare", "/findings"])
def test_no_store_update_that_changes_nothing(served_ui, page, path):
    url, ids = served_ui
    page.context.add_init_script(WATCH)
    query = f"base={ids['baseline']}&cand={ids['tuned']}" if path == "/compare" else f"run={ids['baseline']}"
    page.goto(f"{url}{path}?{query}")
    page.wait_for_selector("#page .page-body > *")
    settle(page)
    assert page.evaluate("() => window.__updates") > 0  # the watch saw the page's updates
    assert page.evaluate("() => window.__noop_updates") == 0
    assert page.evaluate("() => window.store.__scprofResets") is True
