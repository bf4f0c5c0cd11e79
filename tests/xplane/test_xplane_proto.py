"""proto/xplane.proto: the committed generated code is fresh, and the schema is wire-compatible."""

from __future__ import annotations

import os
import subprocess
import sys

from profiler.xspace import xplane_pb2 as xp
from tests.tracekit import missing_extra

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_generated_code_is_fresh(tmp_path):
    try:
        import grpc_tools  # noqa: F401
    except ImportError:
        missing_extra("grpcio-tools (test extra) regenerates the code: pip install -e '.[test]'")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-Iproto",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            "proto/xplane.proto",
        ],
        cwd=ROOT,
        check=True,
    )
    for name in ("xplane_pb2.py", "xplane_pb2.pyi"):
        with open(tmp_path / name) as a, open(os.path.join(ROOT, "profiler", "xspace", name)) as b:
            assert a.read() == b.read(), f"profiler/xspace/{name} is stale: run `make proto`"


def test_field_numbers_match_the_public_schema():
    # The public xplane.proto numbers (tensorflow.profiler): real captures decode only if these hold.
    expected = {
        "XSpace": {"planes": 1, "errors": 2, "warnings": 3, "hostnames": 4},
        "XPlane": {"id": 1, "name": 2, "lines": 3, "event_metadata": 4, "stat_metadata": 5, "stats": 6},
        "XLine": {
            "id": 1,
            "display_id": 10,
            "name": 2,
            "display_name": 11,
            "timestamp_ns": 3,
            "duration_ps": 9,
            "events": 4,
        },
        "XEvent": {"metadata_id": 1, "offset_ps": 2, "num_occurrences": 5, "duration_ps": 3, "stats": 4},
        "XStat": {
            "metadata_id": 1,
            "double_value": 2,
            "uint64_value": 3,
            "int64_value": 4,
            "str_value": 5,
            "bytes_value": 6,
            "ref_value": 7,
        },
        "XEventMetadata": {"id": 1, "name": 2, "display_name": 4, "metadata": 3, "stats": 5, "child_id": 6},
        "XStatMetadata": {"id": 1, "name": 2, "description": 3},
    }
    for msg, fields in expected.items():
        desc = getattr(xp, msg).DESCRIPTOR
        assert desc.full_name == f"tensorflow.profiler.{msg}"
        assert {f.name: f.number for f in desc.fields} == fields
