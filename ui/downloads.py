"""The UI's downloads: a SQL result as CSV, a run as a Perfetto trace, a tuning's tuned config as TOML.

Run names are data, never paths: the trace is written under a fixed name in a private temporary
folder (mkdtemp, mode 0700), which is removed before the file is sent (the open file stays
readable), so nothing is left behind on success, error or a client that hangs up; the name the
browser sees is the run's name reduced to safe characters.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
import shutil
import tempfile
from typing import Any

from flask import Flask, Response, request, send_file

from profiler import sqltree
from profiler.errors import ScprofError, StoreError
from profiler.sql_guard import QueryError, run_query
from ui import state
from ui.store_access import StoreAccess

log = logging.getLogger("scprof.ui")

# The SQL console's limits (ui/pages/sql.py), shared by its CSV download.
SQL_MAX_ROWS = 10_000
SQL_TIMEOUT_S = 10.0
SQL_CSV_MAX_BYTES = 64 * 2**20
SQL_PAGE_MAX_BYTES = 8 * 2**20


def safe_file_stem(name: Any, fallback: str) -> str:
    """`name` as a file name stem of [A-Za-z0-9._-] (others become _), at most 80 characters,
    not starting with a dot; `fallback` when nothing is left."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", str(name or "")).strip("._-")[:80].rstrip("._-")
    return stem or fallback


def register(server: Flask, access: StoreAccess) -> None:
    @server.route("/download/sql.csv")
    def sql_csv() -> Response:
        q = request.args.get("q", "")
        rows = max(1, min(state.int_param(request.args.get("rows"), 1000) or 1000, SQL_MAX_ROWS))
        try:
            with access.open() as store:
                result = run_query(store, q, max_rows=rows, timeout_s=SQL_TIMEOUT_S, max_bytes=SQL_CSV_MAX_BYTES)
        except (QueryError, StoreError) as e:
            return _text(400, str(e))
        return Response(
            _csv(result.table),
            mimetype="text/csv",
            headers={"Content-Disposition": "attachment; filename=scprof-query.csv"},
        )

    @server.route("/download/perfetto")
    def perfetto() -> Response:
        try:
            from exporters.perfetto import export_run
        except ImportError:
            return _text(501, "Perfetto export is not available in this build (exporters/perfetto/ missing)")
        steps = state.steps_param(request.args.get("steps"))
        folder = tempfile.mkdtemp(prefix="scprof-ui-")
        try:
            fd, out = tempfile.mkstemp(suffix=".perfetto-trace", dir=folder)
            os.close(fd)
            with access.open() as store:
                run = store.resolve_run(request.args.get("run", ""))
                name = sqltree.query(store.con, "ui.runs.run_name", run=run).to_pylist()[0]["name"]
                export_run(store, run, out, (steps[0], steps[1] + 1) if steps else None, False)
            trace = open(out, "rb")  # noqa: SIM115 - send_file closes it when the response ends
        except ScprofError as e:
            return _text(400, str(e))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return send_file(
            trace,
            as_attachment=True,
            download_name=safe_file_stem(name, f"run-{run}") + ".perfetto-trace",
            mimetype="application/octet-stream",
        )

    @server.route("/download/tuned.toml")
    def tuned() -> Response:
        """The tuned config of a run's latest tune session (or ?session=): whatif.tune.tuned_toml."""
        from ui.whatif_data import NoTunedConfig, tuned_config

        session = request.args.get("session", "")
        if len(session) > 64:
            return _text(400, "session: too long")
        try:
            with access.open() as store:
                run = store.resolve_run(request.args.get("run", ""))
                stem, text = tuned_config(store, run, session)
        except ScprofError as e:
            return _text(404 if isinstance(e, NoTunedConfig) else 400, str(e))
        return Response(
            text,
            mimetype="application/toml",
            headers={"Content-Disposition": f"attachment; filename={safe_file_stem(stem, f'run-{run}-tuned')}.toml"},
        )


def _csv(table: Any) -> str:
    """A result as CSV: a header, then one line per row, NULL as an empty field."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.column_names)
    columns = [column.to_pylist() for column in table.columns]
    writer.writerows([["" if v is None else v for v in row] for row in zip(*columns, strict=True)])
    return buf.getvalue()


def _text(status: int, message: str) -> Response:
    return Response(" ".join(message.split()) + "\n", status=status, mimetype="text/plain")
