// SQL console (ui/pages/sql.py): Ctrl+Enter / Cmd+Enter in the query box runs the query; a table of
// the schema browser, first unfolded, lists its columns (from its data-columns: [name, type,
// comment] each); a click on a name there ([data-insert]) inserts it into the query at the cursor.
(function () {
  var lastPos = null; // the query box's cursor when it last had one; null: insert at the end

  function remember(ev) {
    if (ev.target && ev.target.id === "sql-text") {
      lastPos = [ev.target.selectionStart, ev.target.selectionEnd];
    }
  }
  document.addEventListener("keyup", remember);
  document.addEventListener("mouseup", remember);
  document.addEventListener("select", remember, true);

  // The list is built with DOM calls (text, attributes): names are data, never markup.
  function listColumns(details) {
    var text = details.getAttribute("data-columns") || "[]";
    var ul = details.querySelector(":scope > ul");
    if (ul && ul.__scprofColumns === text) return; // listed already (a list of other columns is replaced)
    var list = document.createElement("ul");
    JSON.parse(text).forEach(function (c) {
      var li = document.createElement("li");
      li.className = "schema-name schema-col";
      li.textContent = c[0];
      li.setAttribute("data-insert", c[0]);
      li.setAttribute("data-type", c[1]);
      li.title = c[2];
      list.appendChild(li);
    });
    list.__scprofColumns = text;
    if (ul) ul.replaceWith(list);
    else details.appendChild(list);
  }
  document.addEventListener(
    "toggle",
    function (ev) {
      var d = ev.target;
      if (d && d.open && d.matches && d.matches(".schema-item[data-columns]")) {
        listColumns(d);
      }
    },
    true
  );

  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && ev.target && ev.target.id === "sql-text") {
      ev.preventDefault();
      var run = document.getElementById("sql-run");
      if (run) run.click();
    }
  });

  document.addEventListener("click", function (ev) {
    var el = ev.target && ev.target.closest ? ev.target.closest("[data-insert]") : null;
    var box = document.getElementById("sql-text");
    if (!el || !box) return;
    ev.preventDefault(); // a name in a <summary>: insert it, do not fold
    var text = el.getAttribute("data-insert");
    var pos = lastPos || [box.value.length, box.value.length];
    var start = Math.min(pos[0], box.value.length), end = Math.min(pos[1], box.value.length);
    var value = box.value.slice(0, start) + text + box.value.slice(end);
    // through the native setter and an input event, so that React (Dash) sees the new value
    Object.getOwnPropertyDescriptor(window.HTMLTextAreaElement.prototype, "value").set.call(box, value);
    box.dispatchEvent(new Event("input", { bubbles: true }));
    box.focus();
    box.setSelectionRange(start + text.length, start + text.length);
    lastPos = [start + text.length, start + text.length];
  });
})();
