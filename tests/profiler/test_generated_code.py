"""The committed protobuf code is what `make proto` generates from proto/*.proto."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.tracekit import REPO


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-Iproto",
            f"--python_out={out}",
            f"--pyi_out={out}",
            "proto/scprof_trace.proto",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"protoc failed (is grpcio-tools installed? `make install-test`):\n{proc.stderr}"
    return out


@pytest.mark.parametrize("name", ["scprof_trace_pb2.py", "scprof_trace_pb2.pyi"])
def test_generated_code_is_fresh(generated, name):
    committed = (REPO / "profiler" / name).read_bytes()
    assert (generated / name).read_bytes() == committed, (
        f"profiler/{name} is stale against proto/scprof_trace.proto: run `make proto` and commit the result"
    )
