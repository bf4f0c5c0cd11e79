"""The child process that runs jax-tpu-embedding's own host preprocessing for scprof.

`python -m sim_backend.reference_worker` speaks a small protocol on its standard input and
a copy of its standard output (length-prefixed pickles; the library's own prints go to
stderr): a `setup` message describes the stacks scprof planned (tables, offsets, shifts,
limits) and the features, each `step` message carries one step's IDs, and the reply holds
what the library decided: the minibatch count, its stats per stack, and every kept entry
decoded from its CSR buffers. A library CHECK failure aborts this process (as it aborts a
training job); the parent (reference_preprocess.py) reports it. Only this module imports
the library (the `reference` extra).
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import time
from typing import Any, BinaryIO

import numpy as np

ALIGN = 8  # TPU_VECTOR_REGISTER_ALIGNMENT_SIZE in the library


def read_message(fh: BinaryIO) -> Any:
    head = fh.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    return pickle.loads(fh.read(n))


def write_message(fh: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(struct.pack("<Q", len(data)) + data)
    fh.flush()


def _optimizer(name: str) -> Any:
    from jax_tpu_embedding.sparsecore.lib.nn import embedding_spec as es

    return {"sgd": es.SGDOptimizerSpec, "adagrad": es.AdagradOptimizerSpec, "adam": es.AdamOptimizerSpec}[name]()


def table_specs(tables: list[dict]) -> dict[str, Any]:
    """TableSpecs of scprof's tables: {name, vocab, width, optimizer, combiner, limits}."""
    import jax
    from jax_tpu_embedding.sparsecore.lib.nn import embedding_spec as es

    return {
        t["name"]: es.TableSpec(
            name=t["name"],
            vocabulary_size=t["vocab"],
            embedding_dim=t["width"],
            initializer=jax.nn.initializers.zeros,
            optimizer=_optimizer(t["optimizer"]),
            combiner=t["combiner"],
            max_ids_per_partition=t.get("max_ids_per_partition", 256),
            max_unique_ids_per_partition=t.get("max_unique_ids_per_partition", 256),
        )
        for t in tables
    }


def feature_specs(tables: dict[str, Any], features: list[dict], batch: int) -> list[Any]:
    """FeatureSpecs in config order: {name, table, hot} (hot: IDs per sample, its maximum)."""
    from jax_tpu_embedding.sparsecore.lib.nn import embedding_spec as es

    return [
        es.FeatureSpec(
            name=f["name"],
            table_spec=tables[f["table"]],
            input_shape=[batch, f["hot"]],
            output_shape=[batch, tables[f["table"]].embedding_dim],
        )
        for f in features
    ]


def stacked_specs(setup: dict) -> list[Any]:
    """FeatureSpecs stacked exactly as scprof planned (its StackGroups), not re-derived."""
    from jax_tpu_embedding.sparsecore.lib.nn import embedding_spec as es

    n_sc = setup["chips"] * setup["spc"]
    batch = setup["batch"]
    tables = table_specs(setup["tables"])
    feats = feature_specs(tables, setup["features"], batch)
    by_table = {}
    for stack in setup["stacks"]:
        first = tables[stack["tables"][0]["name"]]
        total = batch * sum(1 for f in setup["features"] if f["table"] in {t["name"] for t in stack["tables"]})
        spec = es.StackedTableSpec(
            stack_name=stack["name"],
            stack_vocab_size=sum(t["padded_vocab"] for t in stack["tables"]),
            stack_embedding_dim=stack["padded_width"],
            optimizer=first.optimizer,
            combiner=first.combiner,
            total_sample_count=total,
            max_ids_per_partition=stack["max_ids_per_partition"],
            max_unique_ids_per_partition=stack["max_unique_ids_per_partition"],
        )
        for t in stack["tables"]:
            tables[t["name"]].stacked_table_spec = spec
            tables[t["name"]].setting_in_stack = es.TableSettingInStack(
                stack_name=stack["name"],
                padded_vocab_size=t["padded_vocab"],
                padded_embedding_dim=stack["padded_width"],
                row_offset_in_shard=t["offset"] // n_sc,
                shard_rotation=t["shift"],
            )
            by_table[t["name"]] = (stack, t)
    row_offset: dict[str, int] = {}
    for f in feats:
        stack, t = by_table[f.table_spec.name]
        at = row_offset.get(stack["name"], 0)
        row_offset[stack["name"]] = at + batch
        f.id_transformation = es.FeatureIdTransformation(row_offset=at, col_offset=t["offset"], col_shift=t["shift"])
    return feats


def library_inputs(lengths: list[np.ndarray], ids: list[np.ndarray]) -> list[np.ndarray]:
    """One step's features as the library takes them: a 2-D int32 array for fixed-size bags,
    else an object array of int32 arrays (ragged)."""
    out = []
    for ln, v in zip(lengths, ids, strict=True):
        if len(ln) and (ln == ln[0]).all() and ln[0] > 0:
            out.append(np.ascontiguousarray(v.reshape(len(ln), int(ln[0])), dtype=np.int32))
        else:
            rows = np.split(v.astype(np.int32), np.cumsum(ln)[:-1])
            arr = np.empty(len(rows), dtype=object)
            arr[:] = rows
            out.append(arr)
    return out


def decode_csr(
    row_pointers: np.ndarray,
    embedding_ids: np.ndarray,
    sample_ids: np.ndarray,
    gains: np.ndarray,
    chips: int,
    spc: int,
    minibatches: int,
    minibatching: bool,
) -> dict[str, np.ndarray]:
    """Kept entries of one stack from the library's per-device CSR buffers (leading dimension
    = device): per entry its source SparseCore, minibatch, partition, local row (stacked ID //
    num SCs), row within the source's batch of the stack's features, and gain."""
    n_sc = chips * spc
    rp_block = max(n_sc, ALIGN)
    segs = spc * minibatches if minibatching else spc
    coo_per_sc = embedding_ids.shape[1] // spc
    fields: dict[str, list[np.ndarray]] = {
        k: [] for k in ("source_sc", "minibatch", "partition", "row", "sample", "gain")
    }
    for d in range(chips):
        ends = row_pointers[d, : segs * rp_block].reshape(segs, rp_block)[:, :n_sc].astype(np.int64)
        if minibatching:
            begin = np.zeros(segs, dtype=np.int64)
            begin[1:] = -(-ends[:-1, -1] // ALIGN) * ALIGN
        else:
            begin = np.arange(segs, dtype=np.int64) * coo_per_sc
            ends = ends + begin[:, None]
        starts = np.empty_like(ends)
        starts[:, 0] = begin
        starts[:, 1:] = -(-ends[:, :-1] // ALIGN) * ALIGN
        length = np.maximum(ends - starts, 0).ravel()
        index = np.repeat(starts.ravel() - np.concatenate([[0], np.cumsum(length)[:-1]]), length) + np.arange(
            length.sum()
        )
        seg = np.repeat(np.arange(segs * n_sc), length)
        s, p = np.divmod(seg, n_sc)
        local_sc, mb = (s // minibatches, s % minibatches) if minibatching else (s, np.zeros_like(s))
        fields["source_sc"].append(d * spc + local_sc)
        fields["minibatch"].append(mb)
        fields["partition"].append(p)
        fields["row"].append(embedding_ids[d, index].astype(np.int64))
        fields["sample"].append(sample_ids[d, index].astype(np.int64))
        fields["gain"].append(gains[d, index].astype(np.float64))
    return {k: np.concatenate(v) if v else np.zeros(0) for k, v in fields.items()}


def run_step(setup: dict, specs: list[Any], step: int, lengths: list[np.ndarray], ids: list[np.ndarray]) -> dict:
    """One step through the library: minibatches, stats and kept entries per stack."""
    from jax_tpu_embedding.sparsecore.lib.nn import embedding

    chips, spc = setup["chips"], setup["spc"]
    inputs = library_inputs(lengths, ids)
    t0 = time.perf_counter()
    out, stats = embedding.preprocess_sparse_dense_matmul_input(
        inputs,
        None,
        specs,
        chips,
        chips,
        num_sc_per_device=spc,
        has_leading_dimension=True,
        allow_id_dropping=setup["allow_id_dropping"],
        batch_number=step,
        enable_minibatching=setup["enable_minibatching"],
    )
    library_s = time.perf_counter() - t0  # the library's own work (inputs already built)
    m = int(np.asarray(out.num_minibatches).ravel()[0])
    stacks = {}
    for name in out.lhs_row_pointers:
        stacks[name] = {
            "max_ids": np.asarray(stats.max_ids_per_partition[name], np.int64).ravel(),
            "max_unique_ids": np.asarray(stats.max_unique_ids_per_partition[name], np.int64).ravel(),
            "required_buffer_size": np.asarray(stats.required_buffer_size_per_sc[name], np.int64).ravel(),
            "dropped": int(np.asarray(stats.id_drop_counters[name]).sum()),
            "entries": decode_csr(
                np.asarray(out.lhs_row_pointers[name]),
                np.asarray(out.lhs_embedding_ids[name]),
                np.asarray(out.lhs_sample_ids[name]),
                np.asarray(out.lhs_gains[name]),
                chips,
                spc,
                m,
                setup["enable_minibatching"],
            ),
        }
    return {"minibatches": m, "stacks": stacks, "library_s": library_s}


def auto_stack(msg: dict) -> dict:
    """The library's own stacking (`table_stacking.auto_stack_tables`) of scprof's tables and
    features: per table its stack, padded vocabulary, row offset, rotation and limits."""
    from jax_tpu_embedding.sparsecore.lib.nn import table_stacking

    tables = table_specs(msg["tables"])
    feats = feature_specs(tables, msg["features"], msg["batch"])
    table_stacking.auto_stack_tables(
        feats,
        global_device_count=msg["chips"],
        num_sc_per_device=msg["spc"],
        stack_to_max_ids_per_partition=lambda name, n: msg["stack_max_ids"],
        stack_to_max_unique_ids_per_partition=lambda name, n: msg["stack_max_unique_ids"],
        activation_mem_bytes_limit=msg["activation_mem_bytes_limit"],
    )
    out = {}
    for f in feats:
        t = f.table_spec
        st, s = t.setting_in_stack, t.stacked_table_spec
        out[t.name] = {
            "stack": st.stack_name,
            "padded_vocab": st.padded_vocab_size,
            "row_offset_in_shard": st.row_offset_in_shard,
            "shard_rotation": st.shard_rotation,
            "max_ids_per_partition": s.max_ids_per_partition,
            "max_unique_ids_per_partition": s.max_unique_ids_per_partition,
            "col_offset": f.id_transformation.col_offset,
            "col_shift": f.id_transformation.col_shift,
        }
    return out


def fdo_load(directory: str) -> dict:
    """The library's `CSVFileFDOClient(directory).load()`, as plain arrays per field and stack."""
    import dataclasses

    from jax_tpu_embedding.sparsecore.lib.fdo.csv_file_fdo_client import CSVFileFDOClient

    stats = CSVFileFDOClient(directory).load()
    return {
        f.name: {k: np.asarray(v, np.int64) for k, v in getattr(stats, f.name).items()}
        for f in dataclasses.fields(stats)
    }


def fdo_publish(setup: dict, specs: list[Any], msg: dict) -> dict:
    """Run steps through the library, record each step's stats in a `CSVFileFDOClient` and
    publish them to `msg["dir"]`; returns the limits `update_preprocessing_parameters` then
    gives each stack."""
    from jax_tpu_embedding.sparsecore.lib.fdo.csv_file_fdo_client import CSVFileFDOClient
    from jax_tpu_embedding.sparsecore.lib.nn import embedding

    client = CSVFileFDOClient(msg["dir"])
    for step, (lengths, ids) in enumerate(msg["steps"]):
        _, stats = embedding.preprocess_sparse_dense_matmul_input(
            library_inputs(lengths, ids),
            None,
            specs,
            setup["chips"],
            setup["chips"],
            num_sc_per_device=setup["spc"],
            allow_id_dropping=setup["allow_id_dropping"],
            batch_number=step,
            enable_minibatching=setup["enable_minibatching"],
        )
        client.record(stats)
    client.publish()
    embedding.update_preprocessing_parameters(specs, client.load(), setup["spc"])
    return {
        f.table_spec.stacked_table_spec.stack_name: (
            f.table_spec.stacked_table_spec.max_ids_per_partition,
            f.table_spec.stacked_table_spec.max_unique_ids_per_partition,
        )
        for f in specs
    }


def main() -> None:
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the library's and jax's prints go to stderr, never into the protocol
    sys.stdout = sys.stderr
    proto_in = sys.stdin.buffer
    setup = specs = None
    while True:
        msg = read_message(proto_in)
        if msg is None:
            return
        if msg["kind"] == "setup":
            setup = msg["setup"]
            specs = stacked_specs(setup)
            write_message(proto_out, {"ok": True})
        elif msg["kind"] == "step":
            write_message(proto_out, run_step(setup, specs, msg["step"], msg["lengths"], msg["ids"]))
        elif msg["kind"] == "auto_stack":
            write_message(proto_out, auto_stack(msg))
        elif msg["kind"] == "fdo_load":
            write_message(proto_out, fdo_load(msg["dir"]))
        elif msg["kind"] == "fdo_publish":
            write_message(proto_out, fdo_publish(setup, specs, msg))


if __name__ == "__main__":
    main()
