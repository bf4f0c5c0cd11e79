"""Users' own IDs (`features[].ids_file`) and FDO stats in jax-tpu-embedding's CSV format, both ways,
checked with the library's own `CSVFileFDOClient` and preprocessing (in a child process)."""

from __future__ import annotations

import copy
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scprof.cli import main
from sim_backend.config import config_from_dict
from sim_backend.config_load import load_config
from sim_backend.emulator import setup
from sim_backend.errors import ConfigError
from sim_backend.generate import generate_step
from sim_backend.recording.record import record_run
from sim_backend.reference_preprocess import session_setup
from tests.sim_backend.test_sim_record import small_file


def _ids(rng: np.random.Generator, samples: int, hot: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Ragged Zipf-like bags: 1..hot IDs per sample, skewed towards low IDs."""
    lengths = rng.integers(1, hot + 1, samples)
    ids = np.minimum((rng.pareto(1.2, int(lengths.sum())) * 20).astype(np.int64), vocab - 1)
    return lengths, ids


@pytest.fixture
def own_ids(small_raw, tmp_path) -> dict:
    """The small workload with f_big reading an .npz and f_mid2 a Parquet file (300 and 700
    samples, so steps of 256 wrap around both)."""
    rng = np.random.default_rng(11)
    lengths, ids = _ids(rng, 300, 12, 100_000)
    np.savez(tmp_path / "big.npz", lengths=lengths, ids=ids)
    l2, i2 = _ids(rng, 700, 3, 5000)
    rows = np.split(i2, np.cumsum(l2)[:-1])
    pq.write_table(
        pa.table({"ids": pa.array([r.tolist() for r in rows], type=pa.list_(pa.int64()))}), tmp_path / "mid.parquet"
    )
    raw = copy.deepcopy(small_raw)
    raw["features"][0]["ids_file"] = str(tmp_path / "big.npz")
    raw["features"][2]["ids_file"] = str(tmp_path / "mid.parquet")
    return raw


def test_steps_read_the_files_samples_in_order_wrapping(own_ids, tmp_path):
    cfg = config_from_dict(own_ids)
    z = np.load(tmp_path / "big.npz")
    offsets = np.concatenate([[0], np.cumsum(z["lengths"])])
    rows = pq.read_table(tmp_path / "mid.parquet").column("ids").to_pylist()
    for step in (0, 1, 5):
        batches = generate_step(cfg, step)
        for sample in (0, 17, 255):
            k = (step * 256 + sample) % 300  # by hand: sample k of the file
            got = np.split(batches[0].ids, np.cumsum(batches[0].lengths)[:-1])[sample]
            assert got.tolist() == z["ids"][offsets[k] : offsets[k + 1]].tolist()
            got = np.split(batches[2].ids, np.cumsum(batches[2].lengths)[:-1])[sample]
            assert got.tolist() == rows[(step * 256 + sample) % 700]


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda p: np.savez(p, ids=np.arange(3)), "no array 'lengths'"),
        (lambda p: np.savez(p, lengths=np.array([2, 2]), ids=np.arange(3)), "add up to 4 IDs, the file holds 3"),
        (lambda p: np.savez(p, lengths=np.array([1]), ids=np.array([-4])), "ID -4 is outside"),
        (lambda p: np.savez(p, lengths=np.array([1]), ids=np.array([1.5])), "not integers"),
        (lambda p: p.write_bytes(b"not a zip"), "not a readable .npz"),
        (lambda p: os.mkfifo(p), "not a regular file"),
        (lambda p: None, "no such ID file"),
    ],
)
def test_bad_id_files_are_one_line_naming_key_and_file(small_raw, tmp_path, make, needle):
    path = tmp_path / "ids.npz"
    make(path)
    small_raw["features"][1]["ids_file"] = str(path)
    with pytest.raises(ConfigError) as exc:
        config_from_dict(small_raw)
    text = str(exc.value)
    assert text.startswith(f"features[1].ids_file: {path}") and needle in text and "\n" not in text


def test_a_bad_id_file_is_exit_2_and_the_store_untouched(small_raw, tmp_path, capsys):
    (tmp_path / "ids.parquet").write_bytes(b"PAR1 but not really")
    small_file(tmp_path, small_raw)
    config = tmp_path / "mine.toml"  # the ID file's path is relative to the config that names it
    config.write_text('extends = "small.toml"\n[[features]]\nname = "f_mid"\nids_file = "ids.parquet"\n')
    db = tmp_path / "s.duckdb"
    assert main(["record", str(config), "--db", str(db), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scprof: error: ") and "ids.parquet" in err and "\n" not in err
    assert not db.exists()


# -- FDO stats, both ways, with the library's own client ------------------------------------------


@pytest.fixture(scope="module")
def session(library_session):
    return library_session


def test_the_librarys_client_loads_scprofs_stats_as_it_computes_them(session, own_ids, tmp_path):
    """An ids_file config recorded with derived limits: CSVFileFDOClient.load() reads scprof's
    fdo_stats file, and every value equals the library's own stats of the same IDs, step by step."""
    own_ids["sparsecore"].update(max_ids_per_partition=64, max_unique_ids_per_partition=32)  # minibatches
    res = record_run(
        small_file(tmp_path, own_ids), ["flags.xla_sparse_core_estimate_max_ids=true"], "own", 4, str(tmp_path / "o")
    )
    assert res.fdo_stats_path and os.path.dirname(res.fdo_stats_path) == str(tmp_path / "o")
    assert res.minibatches_per_step > 1
    loaded = session.fdo_load(str(tmp_path / "o"))
    cfg = load_config(small_file(tmp_path, own_ids))
    _, _, groups, lay = setup(cfg)
    session.setup(session_setup(cfg, groups, lay))
    library = [session.step(step, generate_step(cfg, step))["stacks"] for step in range(4)]
    assert set(loaded["max_ids_per_partition"]) == {g.name for g in groups} == set(library[0])
    for g in groups:
        for field, key in (
            ("max_ids_per_partition", "max_ids"),
            ("max_unique_ids_per_partition", "max_unique_ids"),
            ("required_buffer_size_per_sc", "required_buffer_size"),
        ):
            np.testing.assert_array_equal(loaded[field][g.name], np.stack([s[g.name][key] for s in library]))
        np.testing.assert_array_equal(
            loaded["id_drop_counters"][g.name].ravel(), [s[g.name]["dropped"] for s in library]
        )


def test_a_directory_the_librarys_client_published_drives_a_record(session, own_ids, tmp_path):
    cfg = config_from_dict(own_ids)
    _, _, groups, lay = setup(cfg)
    session.setup(session_setup(cfg, groups, lay))
    fdo_dir = tmp_path / "fdo"
    fdo_dir.mkdir()
    expected = session.fdo_publish(str(fdo_dir), [generate_step(cfg, s) for s in range(4)])
    own_ids["sparsecore"].update(max_ids_per_partition=8, max_unique_ids_per_partition=4)  # overridden
    own_ids["flags"]["fdo_stats_dir"] = str(fdo_dir)
    replay = config_from_dict(own_ids)
    _, limits, _, _ = setup(replay)
    for stack, (ids, uniq) in expected.items():
        assert (limits[stack].max_ids_per_partition, limits[stack].max_unique_ids_per_partition) == (ids, uniq)
        assert limits[stack].source == "fdo_stats"
    res = record_run(small_file(tmp_path, own_ids), [], "replay", 4, str(tmp_path / "r"))
    assert res.minibatches_per_step == 1.0 and res.dropped_ids == 0  # the same IDs fit the limits they gave


def test_bad_fdo_stats_are_one_line(small_raw, tmp_path):
    small_raw["flags"]["fdo_stats_dir"] = str(tmp_path)
    with pytest.raises(ConfigError, match="no fdo_stats_<process>_<ns>.csv file"):
        setup(config_from_dict(small_raw))
    (tmp_path / "fdo_stats_0_1.csv").write_text("key,values\nbig_mid_max_ids,1 x 3\n")
    with pytest.raises(ConfigError, match="line 2: values are not integers"):
        setup(config_from_dict(small_raw))
    (tmp_path / "fdo_stats_0_2.csv").write_text("key,values\nbig_mid_max_idz,1 2 3\n")
    with pytest.raises(ConfigError, match="ends in none of"):
        setup(config_from_dict(small_raw))
