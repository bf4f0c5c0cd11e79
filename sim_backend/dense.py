"""FLOPs, parameters and bytes of the dense part (DLRM-DCNv2 shape): workload arithmetic only."""

from __future__ import annotations

from dataclasses import dataclass

from sim_backend.config import RunConfig

GEMM_SUFFIXES = ("/kernel", "/u", "/v")  # dense_param_shapes names of matmul operands


@dataclass(frozen=True)
class DenseWork:
    params: int  # dense parameters (weights + biases)
    forward_flops_per_sample: int
    activation_bytes_per_sample: int  # interaction input read by the TensorCore

    def forward_flops(self, samples: int) -> int:
        return self.forward_flops_per_sample * samples

    def backward_flops(self, samples: int) -> int:
        """Gradients w.r.t. activations and weights: twice the forward matmuls."""
        return 2 * self.forward_flops_per_sample * samples


def dense_work(cfg: RunConfig, activation_bytes: int = 4) -> DenseWork:
    """Bottom MLP -> concat with embeddings -> DCN-v2 low-rank cross layers -> top MLP."""
    d = cfg.dense
    widths = {t.name: t.width for t in cfg.tables}
    params = macs = 0
    prev = d.num_dense_features
    for size in d.bottom_mlp:
        if prev:
            params += prev * size + size
            macs += prev * size
        prev = size
    interaction = (d.bottom_mlp[-1] if d.num_dense_features else 0) + sum(widths[f.table] for f in cfg.features)
    for _ in range(d.cross_layers):
        params += 2 * interaction * d.cross_low_rank + interaction
        macs += 2 * interaction * d.cross_low_rank
    prev = interaction
    for size in d.top_mlp:
        params += prev * size + size
        macs += prev * size
        prev = size
    return DenseWork(params, 2 * macs, interaction * activation_bytes)


def dense_param_shapes(cfg: RunConfig) -> list[tuple[str, tuple[int, ...]]]:
    """Every dense parameter tensor as (name, shape), in the order dense_work counts them.

    MLP layer: kernel [in, out] and bias [out]; DCN-v2 low-rank cross layer: U [d, rank],
    V [rank, d] and bias [d] (d = interaction width). The sizes sum to DenseWork.params.
    """
    d = cfg.dense
    widths = {t.name: t.width for t in cfg.tables}
    shapes: list[tuple[str, tuple[int, ...]]] = []
    prev = d.num_dense_features
    for i, size in enumerate(d.bottom_mlp):
        if prev:
            shapes += [(f"bottom_{i}/kernel", (prev, size)), (f"bottom_{i}/bias", (size,))]
        prev = size
    interaction = (d.bottom_mlp[-1] if d.num_dense_features else 0) + sum(widths[f.table] for f in cfg.features)
    for i in range(d.cross_layers):
        shapes += [
            (f"cross_{i}/u", (interaction, d.cross_low_rank)),
            (f"cross_{i}/v", (d.cross_low_rank, interaction)),
            (f"cross_{i}/bias", (interaction,)),
        ]
    prev = interaction
    for i, size in enumerate(d.top_mlp):
        shapes += [(f"top_{i}/kernel", (prev, size)), (f"top_{i}/bias", (size,))]
        prev = size
    return shapes


@dataclass(frozen=True)
class Gemm:
    """One matrix multiply [batch x] (m x k) @ (k x n): the key of the GEMM performance tables."""

    batch: int
    m: int  # rows of the left operand and the output (samples for a forward layer)
    n: int  # columns of the right operand and the output (output features)
    k: int  # contracting dimension (input features)
    dtype: str = "f32"

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k

    def gradients(self) -> tuple[Gemm, Gemm]:
        """The backward GEMMs of a forward layer Y = X W: dX = dY W^T and dW = X^T dY."""
        return (
            Gemm(self.batch, self.m, self.k, self.n, self.dtype),
            Gemm(self.batch, self.k, self.n, self.m, self.dtype),
        )


def dense_gemms(cfg: RunConfig, samples: int, dtype: str = "f32") -> list[Gemm]:
    """The forward GEMMs of the dense part for `samples` samples, in the order dense_work counts.

    One per MLP layer (samples x in) @ (in x out) and two per DCN-v2 low-rank cross layer,
    x @ U (d -> rank) then @ V (rank -> d); their FLOPs sum to dense_work's forward FLOPs.
    The backward pass is each layer's two gradient GEMMs (`Gemm.gradients`).
    """
    d = cfg.dense
    widths = {t.name: t.width for t in cfg.tables}
    out: list[Gemm] = []
    prev = d.num_dense_features
    for size in d.bottom_mlp:
        if prev:
            out.append(Gemm(1, samples, size, prev, dtype))
        prev = size
    interaction = (d.bottom_mlp[-1] if d.num_dense_features else 0) + sum(widths[f.table] for f in cfg.features)
    for _ in range(d.cross_layers):
        out += [
            Gemm(1, samples, d.cross_low_rank, interaction, dtype),
            Gemm(1, samples, interaction, d.cross_low_rank, dtype),
        ]
    prev = interaction
    for size in d.top_mlp:
        out.append(Gemm(1, samples, size, prev, dtype))
        prev = size
    return out
