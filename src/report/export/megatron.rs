//! Megatron-LM: the `pretrain_gpt.py` arguments of a plan (`pretrain_mamba.py`'s for a hybrid
//! Mamba-2 model), as a bash array to paste into a launch script.
//!
//! Option names as `megatron/training/arguments.py` defines them at Megatron-LM commit
//! 000c4ac24f61 (2025-11-13, of its dev line, after Megatron-Core 0.14; the tests check every
//! option written against the list extracted from it, `tests/fixtures/launchers/`);
//! Megatron-FSDP's as Megatron-LM's `megatron/core/distributed/fsdp` README gives them
//! ("Megatron-FSDP Quick Start").
//!
//! Every field of the shape reaches the arguments or the export is refused by name: RoPE base
//! and scaling, ε, the window, biases, tied embeddings, and the vocabulary (padded by
//! Megatron-LM unless told how); so do the kernels and overlaps the plan's stack assumed and
//! the stage split it was graded with.
//!
//! The layout's other degrees: context parallelism as `--context-parallel-size` with the K/V
//! exchange the plan's stack assumed (`--cp-comm-type p2p`, Megatron-core's ring and its
//! default, or `allgather`); hybrid sharding as `--num-distributed-optimizer-instances`, which
//! splits the DP × CP group into that many instances of the distributed optimizer (ZeRO 1) or,
//! under Megatron-FSDP (ZeRO 2 and 3), makes it HSDP: each instance shards over its
//! `DP/replicate × CP` ranks and the instances all-reduce (the outer group replicates, as
//! without `--enable-full-sharding-in-hsdp`). Megatron-LM derives DP as
//! `world / (TP·CP·PP)`, the layout's DP, so `--global-batch-size` is `b · DP · m` as planned.
//! FP8 is Transformer Engine's: the hybrid format (E4M3 forward, E5M2 gradients) with delayed
//! scaling over an amax history of 1,024 by its maximum, TE's `DelayedScaling` defaults and
//! NeMo's FP8 recipes (Megatron-LM's own defaults are a history of 1, most recent); MXFP8 is
//! E4M3 with a scale per 32 elements (`--fp8-recipe mxfp8`, Blackwell). The weights stay BF16
//! with FP8 copies (no `--fp8-param-gather`), and the output layer is no Transformer Engine
//! module, so it stays BF16 — what the precision model counts.

use std::fmt::Write;

use super::exporter::Launcher;
use super::launch::{CpExchange, Launch};
use crate::cost::step::detailed::Options;
use crate::cost::step::experts::Dispatcher;
use crate::cost::step::pipeline::deepest_interleaving;
use crate::cost::step::precision::Precision;
use crate::cost::step::recipe::Optimizer;
use crate::cost::step::recipe::{Fp8Recipe, MasterWeights, OptimizerStates};
use crate::cost::step::stack::Attention;
use crate::cost::step::stack::GradientPrecision;
use crate::cost::step::stack::Kernels;
use crate::cost::step::stack::LossKernel;
use crate::cost::step::stack::LossPrecision;
use crate::cost::step::MoeRecompute;
use crate::cost::step::Recompute;
use crate::cost::step::Schedule;
use crate::error::{Error, Result};
use crate::model::layout::Layout;
use crate::model::{Experts, LayerSet, Mlp, Norm, Positions, Shape};

/// Megatron-LM command-line arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct Megatron;

/// The pipeline layout of a plan's stages as Megatron-LM's `--pipeline-model-parallel-layout`
/// string (`megatron/core/transformer/pipeline_parallel_layer_layout.py`): one entry per
/// (chunk, stage), chunk-major, `|` between entries, `E` the embedding (first entry), `t` a
/// decoder layer (`t*n` for `n`), `m` a multi-token-prediction depth (`mtp` of them, before the
/// loss), `L` the loss (last entry), a run of `n` equal entries `(entry|)*n`. Each stage's
/// layers split over its `chunks` as evenly as they go.
pub fn pipeline_layout(stages: &[u64], chunks: u64, mtp: u32) -> String {
    let pp = stages.len();
    let mut entries = Vec::with_capacity(pp * chunks as usize);
    for c in 0..chunks {
        for (p, &n) in stages.iter().enumerate() {
            // The first stage's spare layers go to its last chunks, so a chunk short of a
            // layer is its first, which holds the embedding (the rule the memory model
            // grades); elsewhere the first chunks take them, so the last stage's short
            // chunk is its last, with the loss.
            let extra = n % chunks;
            let spare = if p == 0 {
                c >= chunks - extra
            } else {
                c < extra
            };
            let layers = n / chunks + u64::from(spare);
            let mut entry = String::new();
            if p == 0 && c == 0 {
                entry.push('E');
            }
            match layers {
                0 => {}
                1 => entry.push('t'),
                k => entry.push_str(&format!("t*{k}")),
            }
            if p == pp - 1 && c == chunks - 1 {
                entry.push_str(&"m".repeat(mtp as usize));
                entry.push('L');
            }
            entries.push(entry);
        }
    }
    // Runs of equal entries, the last entry always on its own.
    let (last, rest) = entries.split_last().expect("a pipeline has a stage");
    let mut out = String::new();
    let mut i = 0;
    while i < rest.len() {
        let run = rest[i..].iter().take_while(|e| **e == rest[i]).count();
        if run > 1 {
            out.push_str(&format!("({}|)*{run},", rest[i]));
        } else {
            out.push_str(&rest[i]);
            out.push('|');
        }
        i += run;
    }
    out.push_str(last);
    out
}

/// A number as Python's `repr` writes it, so the arguments read as Megatron-LM's own docs do
/// (`1e-05`, `500000`): the shortest round-trip digits, a two-digit exponent.
fn python_float(x: f64) -> String {
    let text = crate::format::exact(x);
    match text.split_once('e') {
        Some((mantissa, exponent)) => {
            let (sign, digits) = match exponent.strip_prefix('-') {
                Some(d) => ("-", d),
                None => ("+", exponent.trim_start_matches('+')),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => text,
    }
}

/// The most (stage, chunk) entries a pipeline layout is written with: far past any pipeline
/// run (PP 1,024 × 64 chunks), so a file's absurd degrees are refused, not spelled out.
pub const MAX_LAYOUT_ENTRIES: u64 = 65_536;

/// The largest of 128, 64, …, 1 (`--make-vocab-size-divisible-by`) with which Megatron-LM
/// pads the vocabulary to itself: Megatron-LM rounds `V` up to a multiple of that value times
/// TP (`_vocab_size_with_padding`), which with its default 128 would add rows the plan did not
/// count (Llama 3's 128,256 at TP 8 becomes 129,024). `None` when TP does not divide `V`.
pub fn vocab_divisor(vocab: u64, tp: u64) -> Option<u64> {
    [128u64, 64, 32, 16, 8, 4, 2, 1]
        .into_iter()
        .find(|d| vocab % (d * tp) == 0)
}

/// `--cp-comm-type` for the K/V exchange the plan's stack assumed: `p2p` (Megatron-core's ring,
/// its default) or `allgather`.
pub fn cp_comm_type(l: &Launch) -> &'static str {
    match l.cp_exchange() {
        CpExchange::Ring => "p2p",
        CpExchange::AllGather => "allgather",
    }
}

/// Transformer Engine's options for a precision and its FP8 recipe ([`Detailed::recipe`]),
/// option and value: none for BF16; for delayed scaling the hybrid format over 1,024 steps of
/// amax history by its maximum (`DelayedScaling`'s defaults, NeMo's FP8 recipes); for current
/// (`tensorwise`) and blockwise scaling the hybrid format too (Megatron-Bridge's
/// `bf16_with_fp8_current_scaling_mixed` and `bf16_with_fp8_subchannel_scaling_mixed`); for
/// MXFP8, E4M3 blocks of 32 with their own scales (`MXFP8BlockScaling`); for NVFP4,
/// Megatron-LM's FP4 options (`--fp4-format e2m1 --fp4-recipe nvfp4`, its one FP4 recipe:
/// `choices=['nvfp4']`). MXFP4 has none: [`arguments`] refuses it.
///
/// [`Detailed::recipe`]: crate::cost::step::detailed::Detailed::recipe
pub fn fp8_arguments(
    precision: Precision,
    recipe: Option<Fp8Recipe>,
) -> &'static [(&'static str, &'static str)] {
    match (precision, recipe) {
        (Precision::Nvfp4, _) => &[("--fp4-format", "e2m1"), ("--fp4-recipe", "nvfp4")],
        (Precision::Bf16 | Precision::Mxfp4, _) | (_, None) => &[],
        (_, Some(Fp8Recipe::Delayed)) => &[
            ("--fp8-format", "hybrid"),
            ("--fp8-recipe", "delayed"),
            ("--fp8-amax-history-len", "1024"),
            ("--fp8-amax-compute-algo", "max"),
        ],
        (_, Some(Fp8Recipe::Tensorwise)) => {
            &[("--fp8-format", "hybrid"), ("--fp8-recipe", "tensorwise")]
        }
        (_, Some(Fp8Recipe::Blockwise)) => {
            &[("--fp8-format", "hybrid"), ("--fp8-recipe", "blockwise")]
        }
        (_, Some(Fp8Recipe::Mxfp8)) => &[("--fp8-format", "e4m3"), ("--fp8-recipe", "mxfp8")],
    }
}

/// Megatron-core's options for the optimizer state's precision
/// ([`crate::cost::step::recipe`]): none at FP32; otherwise the precision-aware optimizer,
/// with BF16 moments (`--exp-avg-dtype`, `--exp-avg-sq-dtype`) and an FP16 master
/// (`--main-params-dtype fp16`) or an FP32 one (`--main-params-dtype fp32`), which Megatron-core
/// stores as remainders beside BF16 weights (`OptimizerConfig.store_param_remainders`, default
/// true: Megatron-Bridge's performance guide, "This is default enabled when using
/// precision-aware optimizer") and whole beside FP8 ones; or the reason it cannot be said: an
/// FP32 master whole beside BF16 weights, which `arguments.py` at commit 000c4ac has no option
/// for.
pub fn optimizer_arguments(options: &Options) -> Result<Vec<String>> {
    let (master, states) = (options.master_weights, options.optimizer_states);
    // An offloaded optimizer (FP32 master and moments, the plan's rule): Megatron-core's hybrid
    // optimizer, on the precision-aware optimizer's path (arguments.py asserts it), with the
    // copies and CPU steps pipelined as the plan timed them
    // ([`crate::cost::step::optimizer_offload`]).
    if options.offload_optimizer.get() > 0.0 {
        return Ok(vec![
            "--use-precision-aware-optimizer".to_string(),
            "--optimizer-cpu-offload".to_string(),
            format!("--optimizer-offload-fraction {}", options.offload_optimizer),
            "--overlap-cpu-optimizer-d2h-h2d".to_string(),
        ]);
    }
    if master.is_default() && states.is_default() {
        return Ok(Vec::new());
    }
    let mut args = vec!["--use-precision-aware-optimizer".to_string()];
    match master {
        MasterWeights::Fp32 if !options.fp8_params => {
            return Err(Error::invalid(
                "--format",
                "megatron",
                "a master Megatron-LM's precision-aware optimizer keeps: beside BF16 weights it stores an FP32 master as remainders (store_param_remainders, which arguments.py at commit 000c4ac has no option to turn off): --master-weights remainders, fp16, or --fp8-params on",
            ))
        }
        MasterWeights::Fp32 | MasterWeights::Remainders => {
            args.push("--main-params-dtype fp32".into())
        }
        MasterWeights::Fp16 => args.push("--main-params-dtype fp16".into()),
    }
    if states == OptimizerStates::Bf16 {
        args.push("--exp-avg-dtype bf16".into());
        args.push("--exp-avg-sq-dtype bf16".into());
    }
    Ok(args)
}

/// The arguments, one option (with its value) an entry.
pub fn arguments(l: &Launch) -> Result<Vec<String>> {
    let (s, step, layout) = (&l.shape, &l.step, &l.layout);
    let refuse = |what: String| Error::invalid("--format", "megatron", what);
    if step.precision == Precision::Mxfp4 {
        return Err(refuse(
            "a precision Megatron-LM trains in: it has no MXFP4 recipe (--fp4-recipe nvfp4 only; AMD's Primus runs one, which this exporter does not write)"
                .to_string(),
        ));
    }
    // Megatron-core runs 1F1B and interleaving (`get_forward_backward_func`).
    if step.schedule.is_v() {
        return Err(refuse(format!(
            "a schedule Megatron-LM runs (1f1b or interleaved:V): {} is not Megatron-core's (its DualPipe-like overlap of the all-to-alls is --overlap-moe-expert-parallel-comm, --ep-overlap); --format torchtitan writes it",
            step.schedule
        )));
    }
    // The stage split is written as a layout string; a mixture of experts' settings as its
    // options; the rest of the plan's settings are its stack's or refused.
    // Of the losses, Transformer Engine's in place is written (`--cross-entropy-fusion-impl
    // te`); Megatron-core keeps no BF16 log-probabilities.
    let loss = (l.options.loss == LossPrecision::InPlace).then_some("--loss-precision");
    let writes: Vec<&str> = [
        "--stages",
        "--ep-overlap",
        "--moe-recompute",
        "--norm-recompute",
        "--latent-recompute",
        "--ep-dispatcher",
        "--gradients",
        "--fp8-recipe",
        "--fp8-params",
        "--optimizer-states",
        "--optimizer",
        "--cuda-graphs",
        "--master-weights",
        "--fp8-bf16-layers",
        "--offload-activations",
        "--offload-optimizer",
    ]
    .into_iter()
    .chain(loss)
    .collect();
    l.refuse_unwritten("megatron", "Megatron-LM", &writes)?;
    let chunks = step.schedule.chunks();
    // No more chunks than every stage holds (the step's rule); a layout string is one entry
    // a chunk.
    let deepest = deepest_interleaving(&l.stages);
    if chunks > deepest || (l.stages.len() as u64).saturating_mul(chunks) > MAX_LAYOUT_ENTRIES {
        return Err(refuse(format!(
            "a pipeline Megatron-LM can lay out: {chunks} chunks a stage over PP {} (at most {deepest} with these stages, and at most {MAX_LAYOUT_ENTRIES} chunks in all)",
            layout.pp
        )));
    }
    // Megatron-LM's own split is even, each stage's layers even over its chunks; any other
    // split the plan was graded with goes in a layout string.
    let even = l
        .stages
        .iter()
        .all(|&n| n == l.stages[0] && n % chunks == 0);
    // A hybrid model (Megatron-core's `MambaModel`, `pretrain_mamba.py`) takes its pattern
    // whole: `MambaStack` splits its layers evenly over the stages, and takes no layout
    // string or model chunks.
    if let Some(h) = &s.hybrid {
        if !even || chunks > 1 {
            return Err(refuse(format!(
                "a pipeline Megatron-core's MambaModel builds: the same layers on every stage, one chunk each; {} ({}) is split {:?} in {chunks} chunks a stage",
                s.name, h.pattern, l.stages
            )));
        }
        // At the pinned commit `MambaStack` builds `M`, `*` and `-` blocks
        // (`mamba_hybrid_layer_allocation.Symbols`; `E` came after it) and recomputes none of
        // them.
        if h.counts().moe > 0 {
            return Err(refuse(format!(
                "a pattern the pinned Megatron-LM's MambaStack builds (M, * and - blocks): {} has {} MoE blocks (E), which Megatron-LM builds from 9a1c0d0 (2025-11-17) on, after the commit these options are checked against",
                s.name,
                h.counts().moe
            )));
        }
        if matches!(step.recompute, Recompute::Full | Recompute::SelectiveLayer) {
            return Err(refuse(format!(
                "a recomputation the pinned Megatron-LM's MambaStack runs (none, or selective: attention's core): it checkpoints no block, and {} asks for {}",
                s.name,
                step.recompute.name()
            )));
        }
        if h.mamba.conv_kernel != 4 {
            return Err(refuse(format!(
                "a Mamba-2 convolution of 4 taps, Megatron-core's (no argument sets another); {} has {}",
                s.name, h.mamba.conv_kernel
            )));
        }
    }
    let settings = l.options.stack.settings();
    let a = &s.architecture;
    let mut args: Vec<String> = Vec::new();
    let mut push = |option: &str, value: Option<String>| {
        args.push(match value {
            Some(v) => format!("{option} {v}"),
            None => option.to_string(),
        });
    };
    // Parallelism.
    push("--tensor-model-parallel-size", Some(layout.tp.to_string()));
    push(
        "--pipeline-model-parallel-size",
        Some(layout.pp.to_string()),
    );
    if !even {
        push(
            "--pipeline-model-parallel-layout",
            Some(format!("\"{}\"", pipeline_layout(&l.stages, chunks, s.mtp))),
        );
    } else if let Schedule::Interleaved(v) = step.schedule {
        push(
            "--num-virtual-stages-per-pipeline-rank",
            Some(v.to_string()),
        );
    }
    if layout.cp > 1 {
        push("--context-parallel-size", Some(layout.cp.to_string()));
        push("--cp-comm-type", Some(cp_comm_type(l).into()));
    }
    if step.sequence_parallel && layout.tp > 1 {
        push("--sequence-parallel", None);
    }
    // ZeRO: the distributed optimizer shards the optimizer state (stage 1); Megatron-FSDP's
    // sharding strategies optim_grads and optim_grads_params are stages 2 and 3.
    match l.zero().get() {
        // Muon (`muon`), and its layer-wise distributed optimizer (`dist_muon`), without
        // Megatron-core's distributed optimizer.
        0 | 1 if l.options.optimizer == Optimizer::Muon => {
            let name = if l.zero().get() == 0 {
                "muon"
            } else {
                "dist_muon"
            };
            push("--optimizer", Some(name.into()));
        }
        0 => {}
        1 => push("--use-distributed-optimizer", None),
        stage => {
            push("--use-megatron-fsdp", None);
            let strategy = if stage == 2 {
                "optim_grads"
            } else {
                "optim_grads_params"
            };
            push("--data-parallel-sharding-strategy", Some(strategy.into()));
            push("--use-distributed-optimizer", None);
            push("--no-gradient-accumulation-fusion", None);
            push("--ckpt-format", Some("fsdp_dtensor".into()));
        }
    }
    // Hybrid sharding: that many distributed-optimizer instances over the DP × CP group
    // (Megatron-FSDP's HSDP from ZeRO 2), each over DP/replicate × CP ranks. A layout has
    // replicas only from ZeRO 1, where the distributed optimizer is on.
    if layout.replicate > 1 {
        if !l.zero().shards_optimizer() {
            return Err(refuse(format!(
                "replicate = {} with ZeRO 1 to 3: --num-distributed-optimizer-instances needs the distributed optimizer, which ZeRO 0 has not",
                layout.replicate
            )));
        }
        push(
            "--num-distributed-optimizer-instances",
            Some(layout.replicate.to_string()),
        );
    }
    // The model.
    push("--num-layers", Some(s.layers.to_string()));
    push("--hidden-size", Some(s.hidden.to_string()));
    push("--ffn-hidden-size", Some(s.ffn.to_string()));
    push("--num-attention-heads", Some(s.heads.to_string()));
    if s.kv_heads < s.heads && s.attention.latent.is_none() {
        push("--group-query-attention", None);
        push("--num-query-groups", Some(s.kv_heads.to_string()));
    }
    if let Some(l) = &s.attention.latent {
        // Megatron-core's `MLASelfAttention`: its ranks and head widths, and the latents'
        // norms, which `--qk-layernorm` builds under latent attention.
        push("--multi-latent-attention", None);
        if let Some(r) = l.q_rank {
            push("--q-lora-rank", Some(r.to_string()));
        }
        push("--kv-lora-rank", Some(l.kv_rank.to_string()));
        push("--qk-head-dim", Some(l.nope_dim.to_string()));
        push("--qk-pos-emb-head-dim", Some(l.rope_dim.to_string()));
        push("--v-head-dim", Some(l.v_dim.to_string()));
        push("--qk-layernorm", None);
    } else if s.hidden % u64::from(s.heads) != 0 || s.hidden / u64::from(s.heads) != s.head_dim() {
        push("--kv-channels", Some(s.head_dim().to_string()));
    }
    // Multi-token prediction: Megatron-core builds its depths on the last stage, as the plan
    // costs them.
    if s.mtp > 0 {
        push("--mtp-num-layers", Some(s.mtp.to_string()));
    }
    // A hybrid's pattern and Mamba-2 mixer (`--is-hybrid-model`, Megatron-LM's Nemotron
    // scripts); its MLPs SwiGLU or squared ReLU, and no position embedding: Nemotron-H's
    // attention blocks take none (the Mamba-2 blocks carry position), as Megatron-LM's
    // Nemotron-H and Nemotron 3 scripts write.
    if let Some(h) = &s.hybrid {
        push("--is-hybrid-model", None);
        push(
            "--spec",
            Some(crate::model::hybrid::MEGATRON_SPEC.to_string()),
        );
        // Quoted: `*` is a glob to the shell.
        push(
            "--hybrid-override-pattern",
            Some(format!("\"{}\"", h.pattern)),
        );
        push("--mamba-num-heads", Some(h.mamba.heads.to_string()));
        push("--mamba-head-dim", Some(h.mamba.head_dim.to_string()));
        push("--mamba-num-groups", Some(h.mamba.groups.to_string()));
        push("--mamba-state-dim", Some(h.mamba.state.to_string()));
    }
    // The block: SwiGLU, squared ReLU or GeLU (Megatron-LM's default activation, no flag);
    // RMSNorm or LayerNorm; RoPE, none (a hybrid's) or a learned position table.
    let style = &s.style;
    match (s.hybrid.is_some(), style.mlp) {
        (true, _) if s.mlp_inputs() == 2 => push("--swiglu", None),
        (true, Mlp::Gelu) => {}
        (true, _) => push("--squared-relu", None),
        (false, Mlp::Swiglu) => push("--swiglu", None),
        (false, Mlp::SquaredRelu) => push("--squared-relu", None),
        (false, Mlp::Gelu) => {}
        (false, Mlp::Relu) => {
            return Err(refuse(format!(
                "an MLP activation Megatron-LM's arguments name (SwiGLU, squared ReLU, GeLU): {} has ReLU",
                s.name
            )))
        }
    }
    push(
        "--normalization",
        Some(
            match style.norm {
                Norm::RmsNorm => "RMSNorm",
                Norm::LayerNorm => "LayerNorm",
            }
            .into(),
        ),
    );
    push("--norm-epsilon", Some(python_float(a.norm_eps)));
    let max_positions = match (s.hybrid.is_some(), style.positions) {
        (true, Positions::Rope) => {
            push("--position-embedding-type", Some("none".into()));
            step.seq_len
        }
        (false, Positions::Rope) => {
            push("--position-embedding-type", Some("rope".into()));
            step.seq_len
        }
        // Megatron-LM asserts the table holds the sequence (arguments.py).
        (_, Positions::Learned { rows }) if rows < step.seq_len => {
            return Err(refuse(format!(
                "a learned position table of at least the sequence: {} has {rows} rows, the plan's sequence is {} tokens",
                s.name, step.seq_len
            )))
        }
        (_, Positions::Learned { rows }) => {
            push(
                "--position-embedding-type",
                Some("learned_absolute".into()),
            );
            rows
        }
    };
    // Megatron-LM's --rotary-base is an int (default 10,000).
    if a.rope_theta.fract() != 0.0 || a.rope_theta > 9.0e15 {
        return Err(refuse(format!(
            "a whole RoPE base, which --rotary-base takes; {} has rope_theta = {}",
            s.name, a.rope_theta
        )));
    }
    push("--rotary-base", Some(format!("{}", a.rope_theta as u64)));
    if let Some(r) = &a.rope_scaling {
        // --use-rope-scaling applies Llama 3.1's scaling with its constants fixed in
        // Megatron-Core (factor 8, low 1, high 4, original context 8,192; at this commit
        // pretrain_gpt.py does not pass --rope-scaling-factor on).
        let llama31 = r.rope_type == "llama3"
            && r.factor == 8.0
            && r.low_freq_factor.unwrap_or(1.0) == 1.0
            && r.high_freq_factor.unwrap_or(4.0) == 4.0
            && r.original_max_position_embeddings.unwrap_or(8192) == 8192;
        if !llama31 {
            return Err(refuse(format!(
                "a RoPE scaling Megatron-LM builds (Llama 3.1's: llama3, factor 8, low 1, high 4, original 8,192); {} has rope_scaling {} with factor {}",
                s.name, r.rope_type, r.factor
            )));
        }
        push("--use-rope-scaling", None);
    }
    if let Some(w) = a.sliding_window {
        // Transformer Engine's ring (p2p) context parallelism has no window (a2a and
        // all-gather have).
        if layout.cp > 1 && l.cp_exchange() == CpExchange::Ring {
            return Err(refuse(format!(
                "a context parallelism Transformer Engine runs with a window: cp = {} passes K/V around a ring (--cp-comm-type p2p), which has none, and {} has a {w}-token sliding window",
                layout.cp, s.name
            )));
        }
        // FlashAttention's window (left, right): a token sees the `left` before it and
        // itself, so W tokens are W − 1 to the left, none to the right (causal).
        push("--window-size", Some(format!("{},0", w - 1)));
        // The layers the window applies to, when not all: Megatron-core's
        // `window_attn_skip_freq` as a list, 1 for a windowed layer and 0 for a full one.
        if let Some(set) = &a.window_layers {
            let pattern: Vec<&str> = (0..s.layers)
                .map(|i| if set.contains(i) { "1" } else { "0" })
                .collect();
            push(
                "--window-attn-skip-freq",
                Some(format!("\"[{}]\"", pattern.join(","))),
            );
        }
    }
    let divisor = vocab_divisor(s.vocab, layout.tp).ok_or_else(|| {
        refuse(format!(
            "a vocabulary TP divides: Megatron-LM pads {}'s {} to a multiple of TP {}, rows the plan did not count",
            s.name, s.vocab, layout.tp
        ))
    })?;
    push("--make-vocab-size-divisible-by", Some(divisor.to_string()));
    if !s.tied_embeddings {
        push("--untie-embeddings-and-output-weights", None);
    }
    let b = s.biases;
    match (b.qkv, b.output, b.mlp) {
        (false, false, false) => push("--disable-bias-linear", None),
        (true, false, false) => {
            push("--disable-bias-linear", None);
            push("--add-qkv-bias", None);
        }
        (true, true, true) => {}
        _ => {
            return Err(Error::invalid(
                "--format",
                "megatron",
                format!(
                    "a model whose biases Megatron-LM can express (none, q/k/v only, or all); {} has attention biases without MLP biases or the reverse",
                    s.name
                ),
            ))
        }
    }
    if s.attention.qk_norm && s.attention.latent.is_none() {
        push("--qk-layernorm", None);
    }
    if s.attention.sinks {
        return Err(refuse(format!(
            "a model whose attention the arguments here build: {} has a learned sink per head (gpt-oss's), which they do not set",
            s.name
        )));
    }
    if let Some(e) = &s.experts {
        experts(s, e, layout, &l.options, &mut push).map_err(refuse)?;
    }
    // The step.
    push("--seq-length", Some(step.seq_len.to_string()));
    push("--max-position-embeddings", Some(max_positions.to_string()));
    push("--micro-batch-size", Some(step.micro_batch.to_string()));
    push("--global-batch-size", Some(l.global_batch.to_string()));
    push("--train-iters", Some(l.iterations().to_string()));
    // The batch law's peak learning rate, where the brief names a law (Megatron-LM has no
    // default: a script without --lr sets its own).
    if let Some(lr) = l.learning_rate {
        push("--lr", Some(format!("{lr:.3e}")));
    }
    // With the AdamW settings the law's learning rate was fitted with, where its source
    // states them: Megatron-LM's defaults (β2 0.999, weight decay 0.01) are not those.
    if let Some(a) = l.adamw {
        push("--adam-beta1", Some(a.beta1.to_string()));
        push("--adam-beta2", Some(a.beta2.to_string()));
        push("--weight-decay", Some(a.weight_decay.to_string()));
    }
    // No dropout (Megatron-LM's default is 0.1): the activations the plan counts keep no
    // dropout masks, as Llama 3's pretraining ran.
    push("--attention-dropout", Some("0.0".into()));
    push("--hidden-dropout", Some("0.0".into()));
    // Megatron-core's recompute modules: core attention under selective recomputation (its
    // default list), the norms, latent attention's up-projections and the MoE layers' parts where
    // the options ask for them.
    let mut modules: Vec<&str> = Vec::new();
    if step.recompute == Recompute::Selective {
        modules.push("core_attn");
    }
    if matches!(step.recompute, Recompute::None | Recompute::Selective) {
        if l.options.norm_recompute {
            modules.push("layernorm");
        }
        if l.options.latent_recompute {
            modules.push("mla_up_proj");
        }
        if s.experts.is_some() {
            match l.options.moe_recompute {
                MoeRecompute::None => {}
                MoeRecompute::Act => modules.push("moe_act"),
                MoeRecompute::Layer => modules.push("moe"),
            }
        }
    }
    match step.recompute {
        Recompute::None | Recompute::Selective if modules.is_empty() => {}
        Recompute::None | Recompute::Selective => {
            push("--recompute-granularity", Some("selective".into()));
            if modules != ["core_attn"] {
                push("--recompute-modules", Some(modules.join(" ")));
            }
        }
        Recompute::Full => {
            push("--recompute-granularity", Some("full".into()));
            push("--recompute-method", Some("uniform".into()));
            push("--recompute-num-layers", Some("1".into()));
        }
        // Half the layers of each stage fully recomputed: Megatron-LM's block method over the
        // first half of a stage's layers.
        Recompute::SelectiveLayer => {
            let per_stage = l.stages[0];
            if per_stage < 2 || step.schedule.chunks() > 1 || !even {
                return Err(Error::invalid(
                    "--format",
                    "megatron",
                    "selective-layer with at least two layers a stage, the same on every stage, and 1f1b: Megatron-LM's block method counts layers per chunk",
                ));
            }
            push("--recompute-granularity", Some("full".into()));
            push("--recompute-method", Some("block".into()));
            push("--recompute-num-layers", Some((per_stage / 2).to_string()));
        }
        Recompute::SelectiveOp | Recompute::SaveQkv => {
            return Err(Error::invalid(
                "--format",
                "megatron",
                "a recomputation Megatron-LM has (none, selective, full or selective-layer); torchtitan's selective-op and MaxText's save-qkv policies have no Megatron-LM flag",
            ))
        }
    }
    push("--bf16", None);
    let recipe = Fp8Recipe::of(step.precision, l.options.fp8_recipe)?;
    for &(option, value) in fp8_arguments(step.precision, recipe) {
        push(option, Some(value.into()));
    }
    // The weights kept and gathered in FP8 (Megatron-core's --fp8-param-gather).
    if l.options.fp8_params {
        push("--fp8-param-gather", None);
    }
    // Layers at the start and end kept in BF16.
    let bf16 = l.options.bf16_layers;
    if !bf16.is_none() {
        push("--first-last-layers-bf16", None);
        push(
            "--num-layers-at-start-in-bf16",
            Some(bf16.start.to_string()),
        );
        push("--num-layers-at-end-in-bf16", Some(bf16.end.to_string()));
    }
    // Activations of the first N layers offloaded to host memory: Megatron-LM's one flag turns
    // cpu_offloading on, activations only (arguments.py; cpu_offloading_activations is on and
    // cpu_offloading_weights off by default in ModelParallelConfig, neither a flag).
    if l.options.offload_activations > 0 {
        push(
            "--cpu-offloading-num-layers",
            Some(l.options.offload_activations.to_string()),
        );
    }
    // Gradients reduced in BF16 (Megatron-LM reduces them in FP32 with --bf16 by default:
    // arguments.py sets accumulate_allreduce_grads_in_fp32 unless --grad-reduce-in-bf16).
    if l.options.gradients == GradientPrecision::Bf16 {
        push("--grad-reduce-in-bf16", None);
    }
    for a in optimizer_arguments(&l.options)? {
        push(&a, None);
    }
    // CUDA graphs: a whole iteration under Megatron-core's own capture, partial scopes under
    // Transformer Engine's (`--cuda-graph-scope` takes its scopes as words).
    let graphs = l.options.cuda_graphs;
    if !graphs.is_none() {
        let implementation = if graphs.is_full() {
            "local"
        } else {
            "transformer_engine"
        };
        push("--cuda-graph-impl", Some(implementation.into()));
        push("--cuda-graph-scope", Some(graphs.scopes().join(" ")));
    }
    // The kernels and overlaps the stack's time model assumed (cost::step::stack::Settings), and the
    // step's TP overlap.
    let backend = match settings.attention {
        Attention::Flash2 => "flash",
        Attention::Cudnn => "fused",
        Attention::Unfused => "unfused",
    };
    push("--transformer-impl", Some("transformer_engine".into()));
    push("--attention-backend", Some(backend.into()));
    let in_place = l.options.loss == LossPrecision::InPlace;
    if settings.loss_kernel == LossKernel::Fused || in_place {
        push("--cross-entropy-loss-fusion", None);
    }
    if in_place {
        push("--cross-entropy-fusion-impl", Some("te".into()));
    }
    if settings.elementwise == Kernels::Eager {
        push("--no-rope-fusion", None);
        push("--no-bias-swiglu-fusion", None);
    }
    // Gradients reduce over the DP × CP ranks that hold the same weights.
    if settings.dp_overlap > 0.0 && layout.dp * layout.cp > 1 {
        push("--overlap-grad-reduce", None);
        if l.zero().get() >= 1 {
            push("--overlap-param-gather", None);
        }
    }
    if step.tp_comm_overlap {
        push("--tp-comm-overlap", None);
    }
    if settings.pp_overlap == 0.0 && layout.pp > 1 {
        push("--no-overlap-p2p-communication", None);
    }
    Ok(args)
}

/// The arguments as a bash array with the plan and what the user must add in comments.
pub fn render(l: &Launch) -> Result<String> {
    let args = arguments(l)?;
    let mut out = l.header();
    // A hybrid is Megatron-core's `MambaModel`, which `pretrain_mamba.py` builds.
    let script = if l.shape.hybrid.is_some() {
        "pretrain_mamba.py"
    } else {
        "pretrain_gpt.py"
    };
    let _ = writeln!(
        out,
        "# Megatron-LM {script} arguments (names from megatron/training/arguments.py at commit 000c4ac24f61)."
    );
    let _ = writeln!(
        out,
        "# Add your data (--data-path), tokenizer (--tokenizer-type, --tokenizer-model; vocabulary {}), optimizer and schedule.",
        l.shape.vocab
    );
    if l.zero().get() >= 2 {
        let _ = writeln!(
            out,
            "# Megatron-FSDP (ZeRO {}): unset CUDA_DEVICE_MAX_CONNECTIONS",
            l.zero()
        );
    } else if l.layout.cp > 1 {
        let _ = writeln!(
            out,
            "# TP or CP > 1 before Blackwell: export CUDA_DEVICE_MAX_CONNECTIONS=1"
        );
    } else if l.layout.tp > 1 {
        let _ = writeln!(
            out,
            "# TP > 1 before Blackwell: export CUDA_DEVICE_MAX_CONNECTIONS=1"
        );
    }
    let layout = &l.layout;
    if layout.cp > 1 {
        let _ = writeln!(
            out,
            "# CP {}: each sequence in 2 × {} chunks of {} tokens, rank i holding chunks i and {} − i; K/V {} (--cp-comm-type {}), as the {} stack does.",
            layout.cp,
            layout.cp,
            l.step.seq_len / (2 * layout.cp),
            2 * layout.cp - 1,
            match l.cp_exchange() {
                CpExchange::Ring =>
                    "passed around a ring, overlapped with attention (Megatron-core's default)",
                CpExchange::AllGather => "all-gathered before attention",
            },
            cp_comm_type(l),
            l.options.stack
        );
    }
    let split = l.options.stages;
    if split != Options::for_stack(l.options.stack).stages {
        // Splits that build the same stages grade alike; the file names the plan's, so that
        // check --from grades the plan as it was written.
        let _ = writeln!(
            out,
            "# Stages: {} layers, the plan's {split} split (--stages {split}).",
            l.stages
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            split = super::launch::serde_name(split),
        );
    }
    if layout.replicate > 1 {
        let _ = writeln!(
            out,
            "# Hybrid sharding: {} {} of {} ranks each (DP {} / {} × CP {}), all-reducing across instances.",
            layout.replicate,
            if l.zero().get() >= 2 {
                "Megatron-FSDP HSDP instances"
            } else {
                "distributed-optimizer instances"
            },
            layout.shard_group(),
            layout.dp,
            layout.replicate,
            layout.cp
        );
    }
    match l.precision() {
        Precision::Bf16 => {}
        Precision::Fp8 => {
            let weights = if l.options.fp8_params {
                "weights kept and all-gathered in FP8 (--fp8-param-gather), the optimizer's master kept"
            } else {
                "weights kept in BF16"
            };
            let scaling = match l.options.fp8_recipe {
                None | Some(Fp8Recipe::Delayed) => "delayed scaling, amax history 1024 by max (TE's DelayedScaling defaults, NeMo's FP8 recipes)",
                Some(Fp8Recipe::Tensorwise) => "per-tensor current scaling (TE's Float8CurrentScaling)",
                Some(Fp8Recipe::Blockwise) | Some(Fp8Recipe::Mxfp8) => "DeepSeek-V3's block scaling, 1×128 activations and 128×128 weights (TE's Float8BlockScaling)",
            };
            let _ = writeln!(
                out,
                "# FP8 (Transformer Engine): hybrid E4M3/E5M2 with {scaling}; {weights}, the output layer in BF16."
            );
        }
        Precision::Mxfp8 => {
            let weights = if l.options.fp8_params {
                "weights kept in MXFP8 and gathered (--fp8-param-gather), the optimizer's master kept"
            } else {
                "weights kept in BF16"
            };
            let _ = writeln!(
                out,
                "# MXFP8 (Transformer Engine's MXFP8BlockScaling): E4M3 with a scale per 32 elements, Blackwell GPUs only; {weights}, the output layer in BF16."
            );
        }
        Precision::Nvfp4 => {
            let _ = writeln!(
                out,
                "# NVFP4 (Transformer Engine's NVFP4BlockScaling): E2M1 with an E4M3 scale per 16 elements, random Hadamard transforms on the weight-gradient operands, Blackwell GPUs only; weights kept in BF16, the output layer in BF16."
            );
        }
        Precision::Mxfp4 => {}
    }
    if layout.cp > 1 {
        let _ = writeln!(
            out,
            "# Launch on {} GPUs ({} ranks of TP × CP × PP × DP = {} × {} × {} × {}, in Megatron-core's tp-cp-ep-dp-pp order), e.g. torchrun ... {script} \"${{MEGATRON_ARGS[@]}}\"",
            l.gpus(),
            l.gpus(),
            layout.tp,
            layout.cp,
            layout.pp,
            layout.dp
        );
    } else {
        let _ = writeln!(
            out,
            "# Launch on {} GPUs ({} ranks of TP × PP × DP), e.g. torchrun ... {script} \"${{MEGATRON_ARGS[@]}}\"",
            l.gpus(),
            l.gpus()
        );
    }
    out.push_str("MEGATRON_ARGS=(\n");
    for a in args {
        let _ = writeln!(out, "    {a}");
    }
    out.push_str(")\n");
    Ok(out)
}

impl Launcher for Megatron {
    const NAME: &'static str = "megatron";
    fn render(&self, launch: &Launch) -> Result<String> {
        render(launch)
    }
}

/// Megatron-LM's flags for a mixture of experts (`megatron/training/arguments.py`,
/// `_add_moe_args`): the experts, their width and the shared experts', the top-k, which layers
/// (`--moe-layer-freq`: left out when every layer is MoE, else the layers as a Python list
/// of 1 for MoE and 0 for dense), the expert grid (EP, and ETP where it is not the TP, which
/// Megatron-core defaults it to), and the grouped GEMMs and dispatcher the time model costs
/// (`alltoall`, or DeepEP's: `flex` with `--moe-enable-deepep`), the all-to-all overlap, and the
/// MoE layers' recomputation (`--recompute-modules`: `moe_act` or `moe`, and `layernorm`,
/// beside `core_attn` under selective recomputation); a bias on the routing scores as
/// Megatron-core's expert bias under sigmoid scores; a hybrid's MoE layers as its pattern's `E`
/// blocks. What Megatron-LM cannot build is refused
/// by name: expert and router biases (gpt-oss's), and a gate on the shared experts
/// (Qwen2-MoE's), a `TransformerConfig` field without an argument in the Megatron-LM that
/// `tests/fixtures/launchers/megatron-arguments.txt` lists.
fn experts(
    s: &Shape,
    e: &Experts,
    layout: &Layout,
    options: &Options,
    push: &mut impl FnMut(&'static str, Option<String>),
) -> std::result::Result<(), String> {
    if e.biases || e.router_bias {
        return Err(format!(
            "a mixture of experts Megatron-LM builds: {} has biases on its experts or router, which its MoE layers have none of",
            s.name
        ));
    }
    push("--num-experts", Some(e.routed.to_string()));
    // A bias on the routing scores (DeepSeek-V3's and Nemotron 3's
    // `e_score_correction_bias`, auxiliary-loss-free balancing) is Megatron-core's expert
    // bias, which it takes with sigmoid scores only (`TransformerConfig`), the scores those
    // models route by.
    if e.score_bias {
        push("--moe-router-score-function", Some("sigmoid".into()));
        push("--moe-router-enable-expert-bias", None);
    }
    push("--moe-router-topk", Some(e.per_token.to_string()));
    push("--moe-ffn-hidden-size", Some(e.ffn.to_string()));
    if let Some(g) = e.groups {
        push("--moe-router-num-groups", Some(g.count.to_string()));
        push("--moe-router-group-topk", Some(g.per_token.to_string()));
    }
    if e.shared_ffn > 0 {
        push(
            "--moe-shared-expert-intermediate-size",
            Some(e.shared_ffn.to_string()),
        );
        if e.shared_gate {
            return Err(format!(
                "a mixture of experts Megatron-LM's arguments build: {} gates its shared experts (Qwen2-MoE's shared_expert_gate), which no Megatron-LM option of the pinned version sets",
                s.name
            ));
        }
    }
    // A hybrid's pattern places its experts on its `E` blocks.
    if e.layers != LayerSet::ALL && s.hybrid.is_none() {
        let pattern: Vec<&str> = (0..s.layers)
            .map(|i| if e.layers.contains(i) { "1" } else { "0" })
            .collect();
        // Quoted: unquoted brackets are a glob to the shell.
        push(
            "--moe-layer-freq",
            Some(format!("\"[{}]\"", pattern.join(","))),
        );
    }
    push("--expert-model-parallel-size", Some(layout.ep.to_string()));
    if layout.etp != layout.tp {
        push(
            "--expert-tensor-parallel-size",
            Some(layout.etp.to_string()),
        );
    }
    push("--moe-grouped-gemm", None);
    match options.ep_dispatcher {
        Dispatcher::AllToAll => push("--moe-token-dispatcher-type", Some("alltoall".into())),
        Dispatcher::DeepEp => {
            push("--moe-token-dispatcher-type", Some("flex".into()));
            push("--moe-enable-deepep", None);
        }
    }
    push("--moe-router-load-balancing-type", Some("aux_loss".into()));
    if options.ep_overlap {
        push("--overlap-moe-expert-parallel-comm", None);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::step::stack::Stack;
    use crate::cost::step::BatchTarget;
    use crate::model::layout::{Degrees, Layout, ZeroStage};
    use crate::model::preset;

    use crate::report::export::launch::launch_with;

    /// The value of `option` in `args`, if written.
    fn value<'a>(args: &'a [String], option: &str) -> Option<&'a str> {
        args.iter().find_map(|a| {
            a.strip_prefix(option)
                .and_then(|rest| rest.strip_prefix(' '))
        })
    }

    fn launch(model: &str, tp: u64, pp: u64, dp: u64, zero: u8) -> Launch {
        let layout = Layout {
            tp,
            cp: 1,
            pp,
            dp,
            zero: ZeroStage::new(zero).unwrap(),
            replicate: 1,
            ep: 1,
            etp: tp,
        };
        let target = BatchTarget::default();
        Launch::new(
            preset(model).unwrap(),
            1e12 as u64,
            layout,
            None,
            8192,
            &target,
            None,
        )
        .unwrap()
    }

    #[test]
    fn the_stages_check_graded_are_the_stages_megatron_builds() {
        // 80 layers over 64 stages, the even split with the rest on the last stages: 48
        // stages of one layer, then 16 of two (48 + 32 = 80), the embedding first, the loss
        // last.
        let l = launch("70b", 8, 64, 4, 3);
        assert_eq!(l.stages.iter().sum::<u64>(), 80);
        assert_eq!(
            pipeline_layout(&l.stages, 1, 0),
            "Et|(t|)*47,(t*2|)*15,t*2L"
        );
        // Megatron-Core unrolls `(x)*n` then `x*n`: 80 decoder layers in 64 stages.
        let args = arguments(&l).unwrap();
        assert!(args
            .iter()
            .any(|a| a.starts_with("--pipeline-model-parallel-layout ")));
        assert!(!args.iter().any(|a| a.starts_with("--decoder-first")));
        // An even split needs no layout; interleaved chunks of two a stage split too.
        assert!(!arguments(&launch("70b", 8, 8, 32, 1))
            .unwrap()
            .iter()
            .any(|a| a.contains("layout")));
        // Chunks of a stage differ by a layer at most; with one layer short of a chunk each,
        // the first stage's first chunk holds the embedding alone, the last's last the loss.
        assert_eq!(pipeline_layout(&[3, 3], 2, 0), "Et|(t*2|)*2,tL");
        assert_eq!(pipeline_layout(&[3, 3], 4, 0), "E|(t|)*6,L");
        // Multi-token-prediction depths sit after the last stage's layers, before the loss
        // (DeepSeek-V3's recipe: `Et|(tt|)*30mL`).
        assert_eq!(pipeline_layout(&[3, 3], 1, 1), "Et*3|t*3mL");
        let mut v3 = vec![4; 15];
        v3.push(1);
        assert_eq!(pipeline_layout(&v3, 1, 1), "Et*4|(t*4|)*14,tmL");
    }

    #[test]
    fn latent_attention_is_written_and_read_back() {
        // DeepSeek-V3's attention on dense layers: Megatron-core's MLA options, its latents'
        // norms as `--qk-layernorm`, no `--kv-channels` (the head widths are the MLA
        // options'); the reader builds the same latent from them.
        let mut l = launch("8b", 1, 4, 64, 1);
        let shape = crate::model::testing::latent(4);
        l = Launch::new(
            shape.clone(),
            1e12 as u64,
            l.layout,
            None,
            4096,
            &BatchTarget::default(),
            None,
        )
        .unwrap();
        let args = arguments(&l).unwrap();
        for want in [
            "--multi-latent-attention",
            "--q-lora-rank 1536",
            "--kv-lora-rank 512",
            "--qk-head-dim 128",
            "--qk-pos-emb-head-dim 64",
            "--v-head-dim 128",
            "--qk-layernorm",
        ] {
            assert!(args.iter().any(|a| a == want), "{want} not in {args:?}");
        }
        assert_eq!(value(&args, "--kv-channels"), None);
        let read = crate::input::from::megatron::parse(&render(&l).unwrap()).unwrap();
        let crate::input::from::design::FileModel::Dims(dims) = read.model else {
            panic!("no dimensions read")
        };
        assert_eq!(dims.latent, shape.attention.latent);
        assert!(dims.qk_norm);
        assert_eq!(dims.head_dim, Some(192));
        assert_eq!(dims.mtp, 0);
        assert_eq!(read.latent_recompute, Some(false));
        // Its up-projections recomputed: Megatron-core's `mla_up_proj` module beside core
        // attention, read back.
        let mut up = l.clone();
        up.step.recompute = Recompute::Selective;
        up.options.latent_recompute = true;
        let args = arguments(&up).unwrap();
        assert_eq!(
            value(&args, "--recompute-modules"),
            Some("core_attn mla_up_proj")
        );
        let read = crate::input::from::megatron::parse(&render(&up).unwrap()).unwrap();
        assert_eq!(read.latent_recompute, Some(true));
        assert_eq!(read.recompute, Some(Recompute::Selective));
        // The launchers whose configs cannot build it refuse it by name.
        let e = crate::report::export::torchtitan::render(&l)
            .unwrap_err()
            .to_string();
        assert!(e.contains("multi-head latent attention"), "{e}");
        let e = crate::report::export::deepspeed::config(&l)
            .unwrap_err()
            .to_string();
        assert!(e.contains("multi-head latent attention"), "{e}");
    }

    #[test]
    fn multi_token_prediction_is_written_and_read_back_and_refused_where_it_cannot_be() {
        // DeepSeek-V3's one depth: `--mtp-num-layers 1`, read back as the file's depth; the
        // launchers whose configs cannot build it refuse it by name.
        let shape = Shape {
            mtp: 1,
            ..crate::model::testing::latent(4)
        };
        // The shape on the 8B's layout at TP 1 × PP 4, 4,096 tokens a sequence.
        let launch_of = |shape: Shape| {
            Launch::new(
                shape,
                1e12 as u64,
                launch("8b", 1, 4, 64, 1).layout,
                None,
                4096,
                &BatchTarget::default(),
                None,
            )
            .unwrap()
        };
        let l = launch_of(shape);
        assert_eq!(
            value(&arguments(&l).unwrap(), "--mtp-num-layers"),
            Some("1")
        );
        let read = crate::input::from::megatron::parse(&render(&l).unwrap()).unwrap();
        let crate::input::from::design::FileModel::Dims(dims) = read.model else {
            panic!("no dimensions read")
        };
        assert_eq!(dims.mtp, 1);
        let dense = launch_of(Shape {
            mtp: 1,
            ..crate::model::preset("8b").unwrap()
        });
        let e = crate::report::export::torchtitan::render(&dense)
            .unwrap_err()
            .to_string();
        assert!(e.contains("multi-token prediction"), "{e}");
        let e = crate::report::export::deepspeed::config(&dense)
            .unwrap_err()
            .to_string();
        assert!(e.contains("multi-token prediction"), "{e}");
    }

    #[test]
    fn llama_3_70b_gets_its_rope_base_epsilon_and_unpadded_vocabulary() {
        let args = arguments(&launch("70b", 8, 8, 32, 1)).unwrap();
        for want in [
            "--rotary-base 500000",
            "--norm-epsilon 1e-05",
            // 128,256 = 2^8 · 501: 32 × TP 8 = 256 divides it, 64 × 8 does not.
            "--make-vocab-size-divisible-by 32",
            // The default stack's overlaps and kernels.
            "--overlap-grad-reduce",
            "--overlap-param-gather",
            "--tp-comm-overlap",
            "--cross-entropy-loss-fusion",
            "--attention-backend fused",
        ] {
            assert!(args.iter().any(|a| a == want), "{want} not in {args:?}");
        }
        assert_eq!(vocab_divisor(128_256, 8), Some(32));
        assert_eq!(vocab_divisor(128_256, 1), Some(128));
        assert_eq!(vocab_divisor(128_257, 8), None);
        assert_eq!(python_float(1e-5), "1e-05");
        assert_eq!(python_float(1e-6), "1e-06");
        assert_eq!(python_float(0.0001), "0.0001");
    }

    #[test]
    fn what_megatron_cannot_build_is_refused_by_name() {
        let mut l = launch("8b", 1, 1, 2048, 1);
        l.shape.architecture.rope_theta = 10_000.5;
        let e = arguments(&l).unwrap_err().to_string();
        assert!(e.contains("rope_theta = 10000.5"), "{e}");
        let mut l = launch("8b", 1, 1, 2048, 1);
        l.shape.architecture.rope_scaling = Some(crate::model::RopeScaling {
            rope_type: "llama3".into(),
            factor: 32.0,
            low_freq_factor: Some(1.0),
            high_freq_factor: Some(4.0),
            original_max_position_embeddings: Some(8192),
        });
        let e = arguments(&l).unwrap_err().to_string();
        assert!(e.contains("factor 32"), "{e}");
        let mut l = launch("8b", 1, 1, 2048, 1);
        l.shape.architecture.sliding_window = Some(4096);
        assert!(arguments(&l)
            .unwrap()
            .contains(&"--window-size 4095,0".to_string()));
        // On every second layer only (gpt-oss's pattern): Megatron-core's skip list, 1 for a
        // windowed layer, which the reader turns back into the set.
        let every_second = LayerSet::Every { first: 0, step: 2 };
        l.shape.architecture.window_layers = Some(every_second.clone());
        let pattern = ["1", "0"].repeat(16).join(",");
        assert_eq!(
            value(&arguments(&l).unwrap(), "--window-attn-skip-freq"),
            Some(format!("\"[{pattern}]\"").as_str())
        );
        let read = crate::input::from::megatron::parse(&render(&l).unwrap()).unwrap();
        let crate::input::from::design::FileModel::Dims(dims) = read.model else {
            panic!("no dimensions read")
        };
        assert_eq!(dims.window_layers, Some(every_second));
        assert_eq!(dims.sliding_window, Some(4096));
        l.shape.architecture.window_layers = None;
        // A ring of K/V has no window in Transformer Engine; an all-gather has.
        let degrees = Degrees {
            ep: 1,
            etp: None,
            tp: 1,
            cp: 2,
            pp: 1,
            replicate: 1,
        };
        let mut l = launch_with("8b", 2048, degrees, 1);
        l.shape.architecture.sliding_window = Some(4096);
        let e = arguments(&l).unwrap_err().to_string();
        assert!(
            e.contains("cp = 2") && e.contains("4096-token sliding window"),
            "{e}"
        );
        l.options = Options::for_stack(Stack::Llama3);
        let args = arguments(&l).unwrap();
        assert_eq!(value(&args, "--cp-comm-type"), Some("allgather"));
    }

    #[test]
    fn a_plan_s_settings_beyond_its_stack_are_written_or_refused_by_name() {
        use crate::cost::step::stack::{Kernels, StageSplit};
        let mut l = launch("405b", 8, 16, 128, 1);
        l.detailed = true;
        // A split that is not the stack's: its layout string, and the file names it.
        l.options.stages = StageSplit::Llama3;
        l.stages = crate::cost::step::pipeline::stage_layers(126, 16, StageSplit::Llama3).unwrap();
        let text = render(&l).unwrap();
        assert!(
            text.contains("--pipeline-model-parallel-layout")
                && text.contains("the plan's llama3 split (--stages llama3)"),
            "{text}"
        );
        // Kernels Megatron-LM's arguments do not set are refused, not run as the stack's.
        l.options.kernels = Kernels::Lean;
        let e = arguments(&l).unwrap_err().to_string();
        assert!(
            e.contains("--kernels lean") && e.contains("megatron-te stack's --kernels fused"),
            "{e}"
        );
    }

    #[test]
    fn context_parallelism_splits_sequences_and_leaves_the_batch_to_dp() {
        // Llama 3.1 70B, TP 4 × CP 2 × PP 4 on 64 GPUs: Megatron-LM's DP is 64 / (4·2·4) = 2.
        let degrees = Degrees {
            ep: 1,
            etp: None,
            tp: 4,
            cp: 2,
            pp: 4,
            replicate: 1,
        };
        let l = launch_with("70b", 64, degrees, 1);
        let args = arguments(&l).unwrap();
        assert_eq!(value(&args, "--context-parallel-size"), Some("2"));
        assert_eq!(value(&args, "--cp-comm-type"), Some("p2p"));
        assert_eq!(value(&args, "--tensor-model-parallel-size"), Some("4"));
        assert_eq!(value(&args, "--pipeline-model-parallel-size"), Some("4"));
        // G = b · DP · m with Megatron's DP: 2,048 = 1 × 2 × 1,024.
        let g: u64 = value(&args, "--global-batch-size")
            .unwrap()
            .parse()
            .unwrap();
        let b: u64 = value(&args, "--micro-batch-size").unwrap().parse().unwrap();
        let dp = l.gpus() / (4 * 2 * 4);
        assert_eq!((l.gpus(), dp, g, b), (64, 2, 2048, 1));
        assert_eq!(g / (b * dp), l.accumulation());
        assert!(args.iter().any(|a| a == "--overlap-grad-reduce"));
        let text = render(&l).unwrap();
        assert!(
            text.contains("64 ranks of TP × CP × PP × DP = 4 × 2 × 4 × 2"),
            "{text}"
        );
        assert!(
            text.contains("export CUDA_DEVICE_MAX_CONNECTIONS=1"),
            "{text}"
        );
        // The stacks that all-gather K/V get Megatron-core's all-gather exchange.
        let mut llama3 = l.clone();
        llama3.options = Options::for_stack(Stack::Llama3);
        let args = arguments(&llama3).unwrap();
        assert_eq!(value(&args, "--cp-comm-type"), Some("allgather"));
        // CP 1 writes neither option.
        let args = arguments(&launch("70b", 8, 8, 32, 1)).unwrap();
        assert!(!args
            .iter()
            .any(|a| a.contains("context-parallel") || a.contains("cp-comm")));
    }

    #[test]
    fn fp8_is_transformer_engine_s_hybrid_delayed_recipe_and_mxfp8_its_block_recipe() {
        let mut l = launch("70b", 8, 8, 32, 1);
        let bf16 = arguments(&l).unwrap();
        assert!(!bf16.iter().any(|a| a.starts_with("--fp8")));
        l.step.precision = Precision::Fp8;
        let args = arguments(&l).unwrap();
        let at = args.iter().position(|a| a == "--bf16").unwrap();
        assert_eq!(
            args[at..at + 5],
            [
                "--bf16",
                "--fp8-format hybrid",
                "--fp8-recipe delayed",
                "--fp8-amax-history-len 1024",
                "--fp8-amax-compute-algo max"
            ]
        );
        assert!(!args.iter().any(|a| a == "--fp8-param-gather"));
        assert!(render(&l).unwrap().contains("# FP8 (Transformer Engine)"));
        l.step.precision = Precision::Mxfp8;
        let args = arguments(&l).unwrap();
        let fp8: Vec<&String> = args.iter().filter(|a| a.starts_with("--fp8")).collect();
        assert_eq!(fp8, ["--fp8-format e4m3", "--fp8-recipe mxfp8"]);
        assert!(render(&l).unwrap().contains("Blackwell"));
    }

    #[test]
    fn replicas_are_distributed_optimizer_instances() {
        // ZeRO 1, 4 replicas over DP 32: the distributed optimizer in 4 instances of 8 ranks.
        let degrees = Degrees {
            ep: 1,
            etp: None,
            tp: 8,
            cp: 1,
            pp: 8,
            replicate: 4,
        };
        let l = launch_with("70b", 2048, degrees, 1);
        let args = arguments(&l).unwrap();
        assert!(args.iter().any(|a| a == "--use-distributed-optimizer"));
        assert_eq!(
            value(&args, "--num-distributed-optimizer-instances"),
            Some("4")
        );
        assert!(render(&l)
            .unwrap()
            .contains("4 distributed-optimizer instances of 8 ranks each"));
        // ZeRO 3 with CP: Megatron-FSDP's HSDP, each instance over DP/2 × CP = 64 × 2 ranks.
        let degrees = Degrees {
            ep: 1,
            etp: None,
            tp: 8,
            cp: 2,
            pp: 1,
            replicate: 2,
        };
        let l = launch_with("70b", 2048, degrees, 3);
        let args = arguments(&l).unwrap();
        assert!(args.iter().any(|a| a == "--use-megatron-fsdp"));
        assert_eq!(
            value(&args, "--data-parallel-sharding-strategy"),
            Some("optim_grads_params")
        );
        assert_eq!(
            value(&args, "--num-distributed-optimizer-instances"),
            Some("2")
        );
        assert!(!args.iter().any(|a| a == "--enable-full-sharding-in-hsdp"));
        assert!(render(&l)
            .unwrap()
            .contains("2 Megatron-FSDP HSDP instances of 128 ranks each"));
        // One instance writes no option; replicas without a sharded optimizer are refused.
        assert!(value(
            &arguments(&launch("70b", 8, 8, 32, 1)).unwrap(),
            "--num-distributed-optimizer-instances"
        )
        .is_none());
        let mut l = launch("70b", 8, 8, 32, 0);
        l.layout.replicate = 2;
        let e = arguments(&l).unwrap_err().to_string();
        assert!(e.contains("replicate = 2") && !e.contains('\n'), "{e}");
    }
}
