"""`pipeplan profile --arch`'s forward FLOPs against the peers' own counts.

torchtitan (0.3.0): its get_nparams_and_flops, called on a real model config
and a model built on the meta device (Llama3Model for llama; a Qwen3Model
with dense first layers and shared experts, as DeepSeek-V3's builder makes
them, for moe). Per token it counts 6 x the matmul parameters (embedding
excluded) + 6 x 2h x s per layer for the attention core: the full s x s
("we follow the convention and do not account for sparsity in causal
attention", torchtitan/models/utils.py). Forward = a third of it.

Megatron-LM: num_floating_point_operations lives in megatron/training/
training.py, which the megatron-core wheel does not ship. When
megatron.training is importable the test calls it; otherwise it checks the
formula restated below from NVIDIA/Megatron-LM commit
d98e8a64ddf34856e74b24714e3bedb2f5a39553, megatron/training/training.py,
transformer_flops() (BSHD, no MLA, no MTP, no linear attention). It counts
the core causal: "/ 2  # causal mask (only half of the mask is non-zero)".

Documented differences (docs/profiles.md, "Peers' FLOPs counts"):
- torchtitan counts the norms' weights (2 FLOPs per token per weight);
  pipeplan counts no FLOPs for norms (memory-bound work).
- torchtitan counts the full s x s core, pipeplan's default the causal half
  (`--attention-core full` matches torchtitan).
- Megatron does not count the MoE router (2 h E per token per moe layer).
"""

import types

import pytest

from oracles import require, run_cli, version_of

REL = 1e-12  # the CSV round-trips doubles; the counts are integers below 2^53


def pipeplan_forward(args):
    """Sum of F over the layers of `pipeplan profile` (GFLOP per microbatch), in FLOPs."""
    out = run_cli("profile", *args).stdout
    rows = [line.split(",") for line in out.splitlines()
            if line and not line.startswith("#")]
    assert rows[0][:2] == ["name", "F"]
    return sum(float(r[1]) for r in rows[1:]) * 1e9, [r[0] for r in rows[1:]]


def shape_args(arch, L, h, a, k, f, V, s, b, t=1, extra=()):
    return ["--arch", arch, "--layers", L, "--hidden", h, "--heads", a, "--kv-heads", k,
            "--ffn", f, "--vocab", V, "--seq", s, "--micro-batch", b, "--tp", t, *extra]


# ---- torchtitan -------------------------------------------------------------

def norm_params(torch, model):
    """Weights of the RMSNorms (torchtitan counts 6 FLOPs per token for each)."""
    from torchtitan.models.common import RMSNorm
    return sum(p.numel() for m in model.modules() if isinstance(m, RMSNorm)
               for p in m.parameters(recurse=False))


def torchtitan_llama(torch, L, h, a, k, f, V):
    from torchtitan.models import llama3
    from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm
    cfg = llama3.Llama3Model.Config(
        dim=h, vocab_size=V,
        tok_embeddings=Embedding.Config(num_embeddings=V, embedding_dim=h,
                                        param_init=llama3._EMBEDDING_INIT),
        norm=RMSNorm.Config(normalized_shape=h, param_init=llama3._NORM_INIT),
        lm_head=Linear.Config(in_features=h, out_features=V,
                              param_init=llama3._output_linear_init(h)),
        layers=llama3._build_llama3_layers(
            n_layers=L, dim=h, n_heads=a, n_kv_heads=k, hidden_dim=f,
            rope=ComplexRoPE.Config(dim=h // a, max_seq_len=1 << 17, theta=500000,
                                    scaling="llama"),
            attn_backend="flex"))
    with torch.device("meta"):
        model = cfg.build()
    return cfg, model


def torchtitan_moe(torch, L, h, a, k, f, V, E, K, dense, dense_ffn, shared_ffn):
    """Qwen3's GQA + MoE blocks; the first `dense` layers dense (dense_ffn wide), the
    rest with a shared expert shared_ffn wide (DeepSeek-V3's builder: hidden_dim =
    moe_hidden_dim * num_shared_experts)."""
    from torchtitan.models import qwen3
    from torchtitan.models.common import Embedding, Linear
    from torchtitan.models.common.config_utils import make_ffn_config
    from torchtitan.models.common.rope import CosSinRoPE
    hd = h // a
    rope = CosSinRoPE.Config(dim=hd, max_seq_len=1 << 17, theta=1e6)
    common = dict(n_layers=L, dim=h, n_heads=a, n_kv_heads=k, head_dim=hd,
                  attn_backend="flex", rope=rope)
    moe_layers = qwen3._build_qwen3_moe_layers(
        moe_hidden_dim=f, num_experts=E, top_k=K, moe_comm_backend="standard", **common)
    if shared_ffn:
        for layer in moe_layers:
            layer.moe.shared_experts = make_ffn_config(
                dim=h, hidden_dim=shared_ffn, w1_param_init=qwen3._LINEAR_INIT,
                w2w3_param_init=qwen3._LINEAR_INIT)
    dense_layers = qwen3._build_qwen3_layers(hidden_dim=dense_ffn or f, **common)
    cfg = qwen3.Qwen3Model.Config(
        vocab_size=V, dim=h, norm=qwen3._qwen3_norm(h),
        tok_embeddings=Embedding.Config(num_embeddings=V, embedding_dim=h,
                                        param_init=qwen3._EMBEDDING_INIT),
        lm_head=Linear.Config(in_features=h, out_features=V, param_init=qwen3._LINEAR_INIT),
        layers=dense_layers[:dense] + moe_layers[dense:])
    with torch.device("meta"):
        model = cfg.build()
    return cfg, model


LLAMA_GRID = [
    # L, h, a, k, f, V, s, b
    (3, 512, 8, 2, 1536, 1000, 256, 1),
    (2, 1024, 16, 16, 2816, 32000, 2048, 2),
    (2, 8192, 64, 8, 28672, 32000, 4096, 1),
    (1, 8192, 64, 8, 28672, 128256, 32768, 1),
]


@pytest.mark.parametrize("shape", LLAMA_GRID, ids=lambda s: "L%d-h%d-s%d" % (s[0], s[1], s[6]))
def test_llama_forward_flops_match_torchtitan(shape):
    torch = require("torch")
    require("torchtitan")
    L, h, a, k, f, V, s, b = shape
    cfg, model = torchtitan_llama(torch, L, h, a, k, f, V)
    _, per_token = cfg.get_nparams_and_flops(model, s)
    titan = (per_token / 3 - 2 * norm_params(torch, model)) * s * b  # forward, no norms
    full, names = pipeplan_forward(shape_args("llama", L, h, a, k, f, V, s, b,
                                              extra=["--attention-core", "full"]))
    assert names == ["tok_embeddings"] + ["layers.%d" % i for i in range(L)] + ["norm", "lm_head"]
    assert full == pytest.approx(titan, rel=REL), "torchtitan %s" % version_of("torchtitan")
    # The default counts the causal half of the core: 2 b s^2 h less per layer.
    causal, _ = pipeplan_forward(shape_args("llama", L, h, a, k, f, V, s, b))
    assert causal == pytest.approx(titan - L * 2 * b * s * s * h, rel=REL)
    # Tensor parallel: each rank's share, t of them.
    t = 8 if a % 8 == 0 else 1
    split, _ = pipeplan_forward(shape_args("llama", L, h, a, k, f, V, s, b, t=t))
    assert split * t == pytest.approx(causal, rel=REL)


MOE_GRID = [
    # L, h, a, k, f (expert), V, s, b, E, K, dense layers, dense ffn, shared experts (x f)
    (4, 256, 8, 2, 128, 1000, 64, 2, 8, 2, 1, 384, 1),
    (3, 1024, 16, 4, 512, 32000, 1024, 1, 64, 6, 1, 2816, 2),
    (3, 2048, 16, 16, 1408, 102400, 4096, 1, 64, 6, 0, 0, 0),
]


@pytest.mark.parametrize("shape", MOE_GRID, ids=lambda s: "L%d-h%d-E%d-dense%d-shared%d" % (
    s[0], s[1], s[8], s[10], s[12]))
def test_moe_forward_flops_match_torchtitan(shape):
    torch = require("torch")
    require("torchtitan")
    L, h, a, k, f, V, s, b, E, K, dense, dense_ffn, shared = shape
    cfg, model = torchtitan_moe(torch, L, h, a, k, f, V, E, K, dense, dense_ffn, shared * f)
    _, per_token = cfg.get_nparams_and_flops(model, s)
    titan = (per_token / 3 - 2 * norm_params(torch, model)) * s * b
    extra = ["--experts", E, "--top-k", K, "--attention-core", "full"]
    if dense:
        extra += ["--dense-layers", dense, "--dense-ffn", dense_ffn]
    if shared:
        extra += ["--shared-experts", shared]
    full, _ = pipeplan_forward(shape_args("moe", L, h, a, k, f, V, s, b, extra=extra))
    assert full == pytest.approx(titan, rel=REL), "torchtitan %s" % version_of("torchtitan")
    if shared:  # Megatron's spelling: the shared experts' total width
        extra[extra.index("--shared-experts"):] = ["--shared-expert-ffn", shared * f]
        by_width, _ = pipeplan_forward(shape_args("moe", L, h, a, k, f, V, s, b, extra=extra))
        assert by_width == full


# ---- Megatron-LM ------------------------------------------------------------

def megatron_restated_flops(args, batch_size):
    """Megatron-LM's transformer_flops() for one batch, restated (not imported) from
    NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553,
    megatron/training/training.py, num_floating_point_operations: BSHD, GQA or MHA,
    no MLA, no MTP, no linear attention, no moe_latent_size, no output gate."""
    tokens = batch_size * args.seq_length
    seqlen_squared_sum = batch_size * args.seq_length * args.seq_length
    if not args.group_query_attention:
        args.num_query_groups = args.num_attention_heads
    if args.num_experts is None:
        num_dense_layers, num_moe_layers, num_experts_routed_to = args.num_layers, 0, 0
    else:
        pattern = args.moe_layer_freq  # a list here
        num_moe_layers = sum(pattern)
        num_dense_layers = args.num_layers - num_moe_layers
        num_experts_routed_to = args.moe_router_topk
    moe_ffn = args.moe_ffn_hidden_size if args.moe_ffn_hidden_size is not None \
        else args.ffn_hidden_size
    shared = args.moe_shared_expert_intermediate_size or 0
    fb, fma = 3, 2
    ffe = 3 if args.swiglu else 2
    q = args.kv_channels * args.num_attention_heads
    kv = args.kv_channels * args.num_query_groups
    self_attn = fb * fma * (args.hidden_size * (q + kv + kv) + q * args.hidden_size)
    core = fb * fma * q / 2 * 2  # "/ 2  # causal mask", "* 2  # QK^T and (QK^T)V"
    return (tokens * (
        fb * fma * args.hidden_size * (
            args.ffn_hidden_size * ffe * num_dense_layers
            + moe_ffn * num_experts_routed_to * ffe * num_moe_layers
            + shared * ffe * num_moe_layers)
        + self_attn * args.num_layers
        + fb * fma * args.hidden_size * args.padded_vocab_size)
        + seqlen_squared_sum * core * args.num_layers)


def megatron_flops(args, batch_size):
    """The real num_floating_point_operations when megatron.training is importable,
    else the restatement above; and which one answered."""
    try:
        from megatron.training.training import num_floating_point_operations
    except Exception:  # the megatron-core wheel ships no megatron.training
        return megatron_restated_flops(args, batch_size), "restated from Megatron-LM d98e8a6"
    return num_floating_point_operations(args, batch_size), "megatron.training"


def megatron_args(L, h, a, k, f, V, s, swiglu, E=None, K=None, dense=0, shared=None):
    return types.SimpleNamespace(
        num_layers=L, hidden_size=h, num_attention_heads=a, kv_channels=h // a,
        group_query_attention=k != a, num_query_groups=k, ffn_hidden_size=f,
        swiglu=swiglu, seq_length=s, padded_vocab_size=V, num_experts=E,
        moe_router_topk=K, moe_ffn_hidden_size=f if E else None,
        moe_layer_freq=[0] * dense + [1] * (L - dense),
        moe_shared_expert_intermediate_size=shared, moe_latent_size=None,
        multi_latent_attention=False, mtp_num_layers=None,
        experimental_attention_variant=None, attention_output_gate=False,
        hybrid_layer_pattern=None, is_hybrid_model=False, spec=None)


MEGATRON_GRID = [
    # arch, L, h, a, k, f, V, s, b, (E, K, dense, dense ffn, shared experts)
    ("gpt", 2, 1024, 16, 16, 4096, 51200, 2048, 4, None),
    ("llama", 2, 8192, 64, 8, 28672, 32000, 4096, 1, None),
    ("llama", 1, 8192, 64, 8, 28672, 32000, 32768, 1, None),
    ("moe", 4, 2048, 16, 4, 1408, 102400, 4096, 1, (64, 6, 1, 10944, 2)),
]


@pytest.mark.parametrize("case", MEGATRON_GRID, ids=lambda c: "%s-h%d-s%d" % (c[0], c[2], c[7]))
def test_forward_flops_match_megatron(case):
    require("megatron.core")
    arch, L, h, a, k, f, V, s, b, moe = case
    extra = []
    if moe:
        E, K, dense, dense_ffn, shared = moe
        # Megatron's ffn_hidden_size is the dense layers' width, moe_ffn_hidden_size the
        # experts'.
        args = megatron_args(L, h, a, k, dense_ffn, V, s, True, E=E, K=K, dense=dense,
                             shared=shared * f)
        args.moe_ffn_hidden_size = f
        extra = ["--experts", E, "--top-k", K, "--dense-layers", dense, "--dense-ffn",
                 dense_ffn, "--shared-experts", shared]
    else:
        args = megatron_args(L, h, a, k, f, V, s, arch != "gpt")
    total, source = megatron_flops(args, b)
    forward = total / 3
    if moe:  # Megatron counts no router: pipeplan's 2 T h E per moe layer
        forward += (L - dense) * 2 * s * b * h * E
    ours, _ = pipeplan_forward(shape_args(arch, L, h, a, k, f, V, s, b, extra=extra))
    assert ours == pytest.approx(forward, rel=REL), "%s, megatron-core %s" % (
        source, version_of("megatron-core"))
