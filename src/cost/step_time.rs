//! How long a training step takes, where each second goes, and the days a run really needs.
//!
//! Per micro-batch on pipeline stage `i` with `lᵢ` layers, TP degree `t`, `b·s` tokens:
//!
//! - **Compute**, under the plan's software stack ([`crate::cost::stack`]): summed over
//!   operations ([`crate::cost::compute`]: each GEMM at its shape on the GPU's kernel figures,
//!   attention, element-wise traffic, and what each recomputation mode repeats); for the
//!   `eager` stack, hardware FLOPs over `peak × efficiency(h/t)` ([`crate::cost::efficiency`]):
//!   per token and layer the forward runs `2·(P_layer − 2h)/t` matrix FLOPs and `2·s·h/t` of
//!   causal attention; backward twice the forward; recomputation adds what its mode repeats.
//!   The last stage adds the output head, `3 · 2·V·h/t` per token.
//! - **TP communication** on NVLink: two all-reduces of `2·b·s·h` bytes per layer in forward, two
//!   in backward, and those a recomputed forward repeats (with sequence parallelism each is a
//!   reduce-scatter plus an all-gather, the same time). A step that overlaps them
//!   ([`Step::tp_comm_overlap`]: Megatron-core's userbuffers, with sequence parallelism) runs
//!   each projection in `t` chunks of rows ([`crate::cost::compute`]) and hides a fraction
//!   `tp_overlap` (the stack's: all of it) behind the layer's GEMMs, never more than they last;
//!   one that does not runs the GEMMs whole and waits for every collective.
//! - **Pipeline**: the slowest stage sets the pace; with `m` micro-batches and `v` chunks the
//!   step takes `(m + (p − 1)/v)` of its micro-batch times, the bubble being `(p − 1)/v` of them
//!   (Narayanan et al. 2021, §2.2). Each micro-batch sends its activations forward and their
//!   gradient back across each boundary, `2·b·s·h` bytes (÷t with sequence parallelism), once
//!   per chunk; a fraction `pp_overlap` hides, a forward send behind the next chunk's forward
//!   and a backward send behind its backward, as far as they last.
//! - **Data parallel** on the network (NVLink if the DP group fits in a node): ZeRO 0 all-reduces
//!   the gradients; ZeRO 1 and 2 reduce-scatter them and all-gather the BF16 weights; ZeRO 3
//!   also all-gathers the weights in every micro-batch's forward and backward, 1.5× the bytes
//!   of plain data parallelism (Rajbhandari et al. 2020). A once-a-step reduction overlaps the
//!   last micro-batch's backward (`dp_overlap` of it; Megatron-LM's `--overlap-grad-reduce`);
//!   ZeRO 2's per-micro-batch reductions and ZeRO 3's gathers overlap the step's compute after
//!   them, as far as it lasts, and ZeRO 3's first layer's gathers in each direction stay
//!   exposed.
//! - **Optimizer**: AdamW over the parameters this GPU updates is bound by memory bandwidth: 28
//!   bytes moved per parameter at 60 % of the HBM's bandwidth (calibration: 2·10⁹ parameters in
//!   19.3 ms on an H200, 2.9 of its 4.8 TB/s).
//!
//! A step's seconds are the sum of those parts; tokens per second follow from the global batch,
//! MFU from model FLOPs `6·N_matrix + 6·L·s·h` per token (causal attention, no recomputation,
//! the input embedding's lookup and the norms left out) over the cluster's peak. Days are the compute time over goodput ([`crate::cost::reliability`]):
//! `days = D · step_seconds / (B · goodput · 86,400)`, linear in the tokens D.

use serde::{Deserialize, Serialize};

use crate::cost::activations::{moe_dense_part, without_shared, Recompute};
use crate::cost::calibration::Calibration;
use crate::cost::chip::{Chip, CHIPS};
use crate::cost::compute::Context;
use crate::cost::efficiency::EfficiencyCurve;
use crate::cost::memory::detailed::{
    stage_expert_params, stage_layers, stage_params_with, Detailed,
};
use crate::cost::memory::plate::shard;
use crate::cost::memory::MemoryModel;
use crate::cost::moe::{dispatch, dispatcher_allowed, MoeRecompute, Routed};
use crate::cost::precision::Precision;
use crate::cost::reliability::Outage;
use crate::cost::stack::{CpComm, Stack};
use crate::cost::step::{StageKinds, Step};
use crate::cost::topology::{all_reduce, reduce_scatter, send, Link};
use crate::cost::Machine;
use crate::error::{Error, Result};
use crate::model::layout::Layout;
use crate::model::Shape;
use crate::units::{FLOPS_PER_TFLOPS, SECONDS_PER_DAY};

/// Bytes AdamW moves per parameter in its step (calibration: about 28).
pub const OPTIMIZER_BYTES_MOVED: f64 = 28.0;
/// Fraction of the HBM bandwidth the optimizer step reaches (calibration: 2.9 of 4.8 TB/s).
pub const OPTIMIZER_HBM_EFFICIENCY: f64 = 0.6;

/// The settings of the detailed time model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeOptions {
    /// Efficiency against the per-GPU width (the `eager` stack's compute).
    pub efficiency: EfficiencyCurve,
    /// The calibrated parameters of the per-operation model.
    pub calibration: Calibration,
    /// Fraction of TP communication hidden behind the layer's GEMMs, 0 to 1 (the stack's).
    pub tp_overlap: f64,
    /// Fraction of pipeline sends hidden behind compute, 0 to 1 (the stack's).
    pub pp_overlap: f64,
    /// Fraction of the compute data-parallel communication can hide behind, 0 to 1 (the
    /// stack's): the last micro-batch's backward for a once-a-step reduction, the step's
    /// compute after them for ZeRO 2's and 3's per-micro-batch traffic.
    pub dp_overlap: f64,
}

impl Default for TimeOptions {
    fn default() -> Self {
        TimeOptions::for_stack(Stack::default())
    }
}

impl TimeOptions {
    /// The settings `stack` implies, at the shipped calibration.
    pub fn for_stack(stack: Stack) -> Self {
        let s = stack.settings();
        TimeOptions {
            efficiency: EfficiencyCurve::calibrated().clone(),
            calibration: Calibration::default(),
            tp_overlap: s.tp_overlap,
            pp_overlap: s.pp_overlap,
            dp_overlap: s.dp_overlap,
        }
    }

    /// Checks each overlap is a fraction in [0, 1] and the calibration is within bounds.
    pub fn validate(&self) -> Result<()> {
        for (flag, v) in [
            ("--tp-overlap", self.tp_overlap),
            ("--pp-overlap", self.pp_overlap),
            ("--dp-overlap", self.dp_overlap),
        ] {
            if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                return Err(Error::invalid(
                    flag,
                    crate::format::exact(v),
                    "a fraction in [0, 1]",
                ));
            }
        }
        self.calibration.validate()
    }
}

/// How days are computed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeModel {
    /// 6ND at the brief's assumed MFU.
    Plate,
    /// The step's time derived from the layout, with failures.
    Detailed(TimeOptions),
}

/// Seconds per step by where they go.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Compute of the slowest stage's micro-batches.
    pub compute: f64,
    /// Exposed tensor-parallel collectives.
    pub tp_comm: f64,
    /// Exposed context-parallel exchanges of keys and values.
    #[serde(default)]
    pub cp_comm: f64,
    /// Exposed pipeline sends.
    pub pp_comm: f64,
    /// Exposed data-parallel collectives.
    pub dp_comm: f64,
    /// Pipeline fill and drain.
    pub bubble: f64,
    /// The optimizer step.
    pub optimizer: f64,
    /// Exposed expert-parallel traffic: the all-to-alls of a mixture of experts' dispatch and
    /// combine, and its expert-TP gathers (absent for a dense model).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ep_comm: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Breakdown {
    /// The step's seconds: the sum of its parts.
    pub fn total(&self) -> f64 {
        self.compute
            + self.tp_comm
            + self.cp_comm
            + self.pp_comm
            + self.dp_comm
            + self.bubble
            + self.optimizer
            + self.ep_comm
    }
}

/// A step's time and what follows from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTime {
    /// Where the seconds go.
    pub breakdown: Breakdown,
    /// Seconds per step.
    pub step_seconds: f64,
    /// Tokens per second over the cluster.
    pub tokens_per_second: f64,
    /// Model FLOPs utilisation, `(6·N_matrix + 6·L·s·h) × tokens/s / (GPUs × peak)`.
    pub mfu: f64,
    /// Hardware FLOPs utilisation: the FLOPs really executed, recomputation included.
    pub hfu: f64,
}

/// Model FLOPs per token, `6·N_matrix + 6·L·s·h`: SPEC.md §4's `6N + 6·L·s·h` (Megatron-LM)
/// counted over the parameters that multiply, leaving out the input embedding (a lookup, as
/// PaLM's MFU does) and the RMSNorm and bias vectors (elementwise): `N_matrix =
/// Shape::matrix_params`, which is `N − V·h − (2L + 1)·h` for Llama 3. Attention's width is
/// `a·d` (`h` for Llama). So hardware FLOPs are never fewer than model FLOPs: HFU ≥ MFU.
pub fn model_flops_per_token(shape: &Shape, seq_len: u64) -> f64 {
    let l = f64::from(shape.layers);
    let width = shape.attention_width() as f64;
    6.0 * shape.matrix_params() as f64 + 6.0 * l * seq_len as f64 * width
}

/// Forward FLOPs per token of one layer on one TP rank: `(2·P_matrices + 2·s·a·d) / t`
/// (`a·d = h` for Llama); the first term the matrices, the second causal attention.
fn layer_forward_flops(shape: &Shape, tp: u64, seq_len: u64) -> (f64, f64) {
    layer_forward_flops_with(shape, shape.layer_matrix_params(), tp, seq_len)
}

/// [`layer_forward_flops`] of a layer whose matrices that multiply a token hold `matrices`
/// parameters (an MoE layer's: [`Shape::moe_layer_matrix_params`]).
fn layer_forward_flops_with(shape: &Shape, matrices: u64, tp: u64, seq_len: u64) -> (f64, f64) {
    let width = shape.attention_width() as f64;
    let matrices = 2.0 * matrices as f64 / tp as f64;
    let attention = 2.0 * seq_len as f64 * width / tp as f64;
    (matrices, attention)
}

/// Hardware FLOPs per token of one layer on one TP rank for forward, backward and
/// recomputation, and the forward's share of them.
fn layer_flops(shape: &Shape, tp: u64, seq_len: u64, recompute: Recompute) -> (f64, f64) {
    layer_flops_with(shape, shape.layer_matrix_params(), tp, seq_len, recompute)
}

/// [`layer_flops`] of a layer whose matrices that multiply a token hold `matrices` parameters.
fn layer_flops_with(
    shape: &Shape,
    matrices: u64,
    tp: u64,
    seq_len: u64,
    recompute: Recompute,
) -> (f64, f64) {
    let (matrices, attention) = layer_forward_flops_with(shape, matrices, tp, seq_len);
    let forward = matrices + attention;
    let again = match recompute {
        Recompute::None => 0.0,
        Recompute::Selective => attention,
        Recompute::Full => forward,
        Recompute::SelectiveLayer => forward / 2.0,
        Recompute::SaveQkv => {
            let (h, q) = (shape.hidden as f64, shape.attention_width() as f64);
            let g = f64::from(shape.kv_heads) * shape.head_dim() as f64;
            forward - 2.0 * h * (q + 2.0 * g) / tp as f64
        }
        Recompute::SelectiveOp => {
            // The K, attention-output and up projections: 2·(g·h + q·h + f·h)/t per token.
            let (h, f) = (shape.hidden as f64, shape.ffn as f64);
            let q = shape.attention_width() as f64;
            let g = f64::from(shape.kv_heads) * shape.head_dim() as f64;
            2.0 * h * (g + q + f) / tp as f64
        }
    };
    (3.0 * forward + again, forward)
}

/// The link a group of `size` ranks, `stride` apart, uses: NVLink when it fits in one node;
/// otherwise the network, where NCCL spreads the ring over the NICs of the group's members in
/// each node (one 400 Gb/s NIC per GPU), so the bus bandwidth is the per-NIC figure times the
/// members per node, at most NVLink's.
fn link_for(machine: &Machine, stride: u64, size: u64) -> Link {
    let node = machine.cluster.gpus_per_node;
    if stride.saturating_mul(size) <= node {
        return machine.topology.intra();
    }
    let per_node = (node / stride.max(1)).clamp(1, size);
    let mut link = machine.topology.inter();
    link.bytes_per_second =
        (link.bytes_per_second * per_node as f64).min(machine.topology.intra().bytes_per_second);
    link
}

/// The chip the per-operation model runs `stack` on, or why there is none (`Ok(None)` for a
/// stack at the eager curve, which needs none). A search calls it once before it starts, so a
/// GPU without kernel figures is refused by name rather than leaving no configuration.
pub fn stack_chip(machine: &Machine, stack: Stack) -> Result<Option<&'static Chip>> {
    if !stack.settings().per_operation {
        return Ok(None);
    }
    chip_for(machine, stack).map(Some)
}

/// The chip the per-operation model runs `stack` on, or why there is none.
fn chip_for(machine: &Machine, stack: Stack) -> Result<&'static Chip> {
    Chip::of(machine.peak_tflops, machine.topology.hbm_gbps).ok_or_else(|| {
        let names: Vec<&str> = CHIPS.iter().map(|c| c.name).collect();
        Error::invalid(
            "--stack",
            stack,
            format!(
                "a GPU with published kernel figures ({}); a GPU of {} TFLOP/s and {} GB/s has none, \
                 so use --stack eager or one of those GPUs",
                names.join(", "),
                machine.peak_tflops,
                machine.topology.hbm_gbps
            ),
        )
    })
}

/// The FP8 ceiling the step's projections run at on `chip`, or why there is none: the GPU
/// must have FP8 tensor cores (`fp8_tflops` > 0; MXFP8 needs `mxfp8`) and published FP8 GEMM
/// figures.
fn fp8_for(machine: &Machine, chip: &Chip, precision: Precision) -> Result<f64> {
    precision.supported_on(machine.fp8_tflops, machine.mxfp8)?;
    chip.fp8_ceiling().ok_or_else(|| {
        Error::invalid(
            "--precision",
            precision,
            format!(
                "bf16 on the {}: it has no published FP8 GEMM figures",
                chip.name
            ),
        )
    })
}

/// Exposed seconds of one layer's context-parallel exchange per micro-batch on the CP group
/// (`CP` ranks `TP` apart), for `tokens` tokens of this rank and the layer's attention core
/// `(forward, backward)` seconds. A K and V chunk is `4·g·T/t` bytes (BF16).
///
/// - **Ring** (Megatron-core): forward runs `CP − 1` steps, each sending the chunk in hand to
///   the next rank while attention runs on it, `1/CP` of the core; only what a send lasts
///   beyond its block is exposed. Backward sends the chunk and its gradients (twice the bytes)
///   behind `1/CP` of the backward core. The sends are point to point: NVLink while the CP
///   group fits in a node with its TP ranks, else one NIC.
/// - **All-gather** (Llama 3): K and V all-gathered before attention and their gradients
///   reduce-scattered after, exposed, over the group's NICs.
///
/// A recomputed forward repeats its exchange: under full, selective and save-qkv
/// recomputation (all recompute attention), half of it under selective-layer.
fn cp_exchange(
    machine: &Machine,
    shape: &Shape,
    layout: &Layout,
    tokens: f64,
    recompute: Recompute,
    (attention_forward, attention_backward): (f64, f64),
    comm: Option<CpComm>,
) -> f64 {
    let cp = layout.cp;
    if cp <= 1 {
        return 0.0;
    }
    let forwards = match recompute {
        Recompute::None | Recompute::SelectiveOp => 1.0,
        Recompute::SelectiveLayer => 1.5,
        Recompute::Full | Recompute::Selective | Recompute::SaveQkv => 2.0,
    };
    let g = f64::from(shape.kv_heads) * shape.head_dim() as f64;
    let chunk = 4.0 * g * tokens / layout.tp as f64;
    let n = cp as f64;
    match comm {
        Some(CpComm::Ring) => {
            let link = if layout.tp.saturating_mul(cp) <= machine.cluster.gpus_per_node {
                machine.topology.intra()
            } else {
                machine.topology.inter()
            };
            let forward = (send(link, chunk) - attention_forward / n).max(0.0);
            let backward = (send(link, 2.0 * chunk) - attention_backward / n).max(0.0);
            (n - 1.0) * (forwards * forward + backward)
        }
        Some(CpComm::AllGather) => {
            let link = link_for(machine, layout.tp, cp);
            let one = reduce_scatter(link, cp, n * chunk);
            forwards * one + one
        }
        None => 0.0,
    }
}

/// One stage's compute per micro-batch: (all of it, its forward, its GEMMs), seconds.
type StageCompute = (f64, f64, f64);

/// Whether `step`'s TP collectives are chunked and overlapped with its GEMMs: the step asks
/// for it ([`Step::tp_comm_overlap`]) and the options hide some of them.
fn overlaps(step: &Step, opts: &TimeOptions) -> bool {
    step.tp_comm_overlap && opts.tp_overlap > 0.0
}

/// Seconds hidden of `comm` behind `window` seconds of compute, at most `overlap` of it.
fn hidden(comm: f64, overlap: f64, window: f64) -> f64 {
    (overlap * comm).min(window.max(0.0))
}

/// One micro-batch's compute on one TP × CP rank, per layer and for the head: what the rest of
/// a step is built on. It depends on the layout only through TP and CP and on the step only
/// through [`MicroBatch::key`] (not its schedule or global batch), so a search works it out
/// once for each such key and reuses it across pipelines, ZeRO stages, replicas, interleaving
/// depths and batches ([`MicroBatchCache`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MicroBatch {
    /// One layer's (all, forward, GEMMs, recomputed ones included), seconds.
    layer: StageCompute,
    /// The head's (all, forward), seconds.
    head: (f64, f64),
    /// One layer's attention core (forward, backward), seconds.
    attention: (f64, f64),
    /// One MoE layer's (all, forward, GEMMs), seconds, and its routing; `None` for a dense
    /// shape.
    moe: Option<(StageCompute, Routed)>,
}

/// What a [`MicroBatch`] depends on besides the shape, the machine and the options: TP, CP,
/// EP, ETP and the step without its schedule and global batch.
pub type MicroBatchKey = (u64, u64, u64, u64, Step);

impl MicroBatch {
    /// The key of `layout` and `step`.
    pub fn key(layout: &Layout, step: &Step) -> MicroBatchKey {
        let step = Step {
            global_batch_tokens: 0,
            ..step.unscheduled()
        };
        (layout.tp, layout.cp, layout.ep, layout.etp, step)
    }

    /// One micro-batch's compute of `shape` under `layout` with the detailed step `d`.
    pub fn of(
        machine: &Machine,
        shape: &Shape,
        layout: &Layout,
        d: &Detailed,
        opts: &TimeOptions,
    ) -> Result<MicroBatch> {
        let step = &d.step;
        let stack = d.options.stack;
        let settings = stack.settings();
        let (tp, cp) = (layout.tp, layout.cp);
        let (h, v) = (shape.hidden as f64, shape.vocab as f64);
        // This rank's tokens of a micro-batch: `b·s/CP`.
        let tokens = (step.micro_batch * step.seq_len) as f64 / cp as f64;
        let peak = machine.peak_tflops * FLOPS_PER_TFLOPS;
        let precision = step.precision;
        let routed = Routed::of(shape, layout, tokens, d.options.moe_imbalance);
        if settings.per_operation {
            let chip = chip_for(machine, stack)?;
            let fp8_ceiling = if precision.is_fp8() {
                fp8_for(machine, chip, precision)?
            } else {
                0.0
            };
            let ctx = Context {
                chip,
                gemm_ceiling: chip.gemm_ceiling(),
                peak_flops: peak,
                hbm_bytes_per_second: machine.topology.hbm_gbps * 1e9,
                sustained: opts.calibration.sustained_for(stack),
                // The stack's element-wise kernels, unless --kernels chose others than the
                // stack's.
                elementwise: if d.options.kernels == settings.kernels {
                    settings.elementwise
                } else {
                    d.options.kernels
                },
                attention: settings.attention,
                loss: settings.loss_kernel,
                tp,
                sequence_parallel: step.sequence_parallel,
                tp_chunks: if overlaps(step, opts) { tp } else { 1 },
                micro_batch: step.micro_batch,
                seq_len: step.seq_len,
                cp,
                cp_gathered: settings.cp == Some(CpComm::AllGather),
                precision,
                fp8_peak_flops: machine.fp8_tflops * FLOPS_PER_TFLOPS,
                fp8_ceiling,
            };
            let l = ctx.layer(shape, step.recompute);
            // TP collectives overlap the GEMMs, the recomputed forward's among them.
            let gemm = l.gemm.forward + l.gemm.backward + l.recompute;
            let o = ctx.head(shape);
            let moe = routed.map(|r| {
                let l = ctx.moe_layer(shape, step.recompute, d.options.moe_recompute, &r);
                let gemm = l.gemm.forward + l.gemm.backward + l.recompute;
                ((l.total(), l.forward(), gemm), r)
            });
            Ok(MicroBatch {
                layer: (l.total(), l.forward(), gemm),
                head: (o.forward + o.backward, o.forward),
                attention: (l.attention.forward, l.attention.backward),
                moe,
            })
        } else if routed.is_some() {
            Err(Error::invalid(
                "--stack",
                stack,
                "a stack whose step is costed by operation (megatron-te and the others with \
                 kernel figures): the eager curve has no figures for a mixture of experts",
            ))
        } else {
            let rate = peak * opts.efficiency.at(h / tp as f64);
            let (per_layer, forward_per_layer) =
                layer_flops(shape, tp, step.seq_len, step.recompute);
            let one_head = 2.0 * v * h / tp as f64;
            let all = tokens * per_layer / rate;
            let (_, attention_per_token) = layer_forward_flops(shape, tp, step.seq_len);
            let attention = tokens * attention_per_token / rate;
            Ok(MicroBatch {
                layer: (all, tokens * forward_per_layer / rate, all),
                head: (tokens * 3.0 * one_head / rate, tokens * one_head / rate),
                attention: (attention, 2.5 * attention),
                moe: None,
            })
        }
    }
}

/// The [`MicroBatch`]es of one shape on one machine under one set of options, each worked out
/// once: a search grades many configurations that share one (most differ in the pipeline,
/// ZeRO stage, replicas, interleaving depth or batch). Its answers are those of
/// [`MicroBatch::of`] exactly.
#[derive(Debug, Default)]
pub struct MicroBatchCache {
    found: crate::hash::FastMap<MicroBatchKey, MicroBatch>,
}

impl MicroBatchCache {
    /// Forgets every micro-batch (for another shape), keeping the room.
    pub fn clear(&mut self) {
        self.found.clear();
    }

    /// The micro-batch of `layout` and `d`, from the cache or worked out and kept.
    pub fn get(
        &mut self,
        machine: &Machine,
        shape: &Shape,
        layout: &Layout,
        d: &Detailed,
        opts: &TimeOptions,
    ) -> Result<MicroBatch> {
        let key = MicroBatch::key(layout, &d.step);
        if let Some(m) = self.found.get(&key) {
            return Ok(*m);
        }
        let m = MicroBatch::of(machine, shape, layout, d, opts)?;
        self.found.insert(key, m);
        Ok(m)
    }
}

/// The time of one training step of `shape` under `layout` with the detailed step `d`, on
/// `machine`.
pub fn step_time(
    machine: &Machine,
    shape: &Shape,
    layout: &Layout,
    d: &Detailed,
    opts: &TimeOptions,
) -> Result<StepTime> {
    let micro_batch = MicroBatch::of(machine, shape, layout, d, opts)?;
    step_time_of(machine, shape, layout, d, opts, &micro_batch)
}

/// [`step_time`] on a micro-batch's compute worked out before (`micro_batch` must be
/// [`MicroBatch::of`] the same arguments).
pub fn step_time_of(
    machine: &Machine,
    shape: &Shape,
    layout: &Layout,
    d: &Detailed,
    opts: &TimeOptions,
    micro_batch: &MicroBatch,
) -> Result<StepTime> {
    d.schedule_allowed()?;
    let base = unscheduled(machine, shape, layout, d, opts, micro_batch)?;
    scheduled(layout, d, opts, &base)
}

/// A step's time before its schedule: the slowest stage's compute and communication per
/// micro-batch, the data-parallel traffic and the optimizer, which every schedule of a step
/// shares ([`unscheduled`]); [`scheduled`] adds the pipeline's sends and bubble.
#[derive(Debug, Clone, PartialEq)]
pub struct Unscheduled {
    /// What the layouts of the same degrees share.
    part: Unsharded,
    dp_comm: f64,
    optimizer: f64,
}

/// [`Unscheduled`] for the step `d` (whatever its schedule) under `layout`.
pub fn unscheduled(
    machine: &Machine,
    shape: &Shape,
    layout: &Layout,
    d: &Detailed,
    opts: &TimeOptions,
    micro_batch: &MicroBatch,
) -> Result<Unscheduled> {
    let kinds = d.kinds(shape, layout)?;
    let part = unsharded_in(machine, shape, layout, d, opts, micro_batch, &kinds)?;
    Ok(unscheduled_of(machine, layout, d, opts, &part))
}

/// The part of [`Unscheduled`] that does not depend on how the data-parallel group shards the
/// state (the layout's ZeRO stage and hybrid-sharding replicas): the slowest stage's compute
/// and its TP, CP and pipeline traffic per micro-batch, its parameters and the FLOPs. A search
/// works it out once for the layouts of the same degrees and finishes it for each
/// ([`unscheduled_of`]), as [`unscheduled`] does.
#[derive(Debug, Clone, PartialEq)]
pub struct Unsharded {
    kinds: StageKinds,
    m: u64,
    compute: f64,
    forward: f64,
    tp_comm: f64,
    cp_comm: f64,
    pp_send: f64,
    /// The slowest stage's layers, and its parameters on this GPU's TP shard (the routed
    /// experts' apart, in `experts`).
    stage_layers: u64,
    psi: f64,
    experts: f64,
    /// The slowest stage's exposed expert-parallel traffic per micro-batch (all-to-alls and
    /// the expert-TP gathers), seconds; 0 for a dense model.
    ep_comm: f64,
    /// The FP8 casts of the slowest stage's matrices, bytes a step (0 in BF16).
    fp8_casts: f64,
    flops: (f64, f64, f64),
}

/// Seconds for `replicas` hybrid-sharding replicas to all-reduce a shard (`bytes` over `shards`
/// ranks) over `link`; none with one replica.
fn across_replicas(link: Link, replicas: u64, shards: u64, bytes: f64) -> f64 {
    if replicas > 1 {
        all_reduce(link, replicas, bytes / shards as f64)
    } else {
        0.0
    }
}

/// SMs the experts' dispatch and combine kernels hold while they run beside compute: 20, the
/// budget Megatron-core gives DeepEP (`moe_deepep_num_sms`, `transformer_config.py`).
pub const COMM_SMS: f64 = 20.0;

/// One MoE layer's compute per micro-batch (`compute`: all, forward, GEMMs) with its exposed
/// TP collectives and its expert-parallel traffic ([`crate::cost::moe`]): the dense layer's TP
/// collectives `tp_layer` halved without shared experts (only attention's remain; the routed
/// experts' split is ETP's), with one more all-reduce's worth (`tp_one`) where `moe`
/// recomputation runs the shared experts' forward again, hidden as far as the stack overlaps
/// them (`overlap`); per
/// direction a dispatch and a combine all-to-all of the routes the rank sends (`2h` bytes
/// each, BF16) over the EP group (ranks `ETP` apart), and with ETP > 1 an all-gather and a
/// reduce-scatter of its routes over the ETP group (inside a node). Full recomputation repeats
/// the forward's two of each, selective-layer half of them. Megatron-core runs them exposed
/// unless `--overlap-moe-expert-parallel-comm` is set (`ep_overlap`): then each micro-batch's
/// all-to-alls run beside another's compute, hidden behind the MoE layer's compute as far as it
/// lasts (the ETP gathers stay exposed), and that compute, short of the SMs the
/// communication holds ([`COMM_SMS`] of the chip's), takes `1/(1 − COMM_SMS/SMs)` as long.
fn moe_layer_comm(
    machine: &Machine,
    shape: &Shape,
    layout: &Layout,
    d: &Detailed,
    r: &Routed,
    (tp_layer, tp_one, overlap): (f64, f64, f64),
    compute: StageCompute,
) -> (StageCompute, f64, f64) {
    let shared = r.shared > 0.0;
    let tp_moe = if shared { tp_layer } else { tp_layer / 2.0 };
    // `moe` recomputes the shared experts (with none or selective recomputation, the only
    // steps the recompute modules go with), and with them their all-gather and reduce-scatter.
    let tp_moe = if shared && d.options.moe_recompute == MoeRecompute::Layer {
        tp_moe + tp_one
    } else {
        tp_moe
    };
    let tp_moe = tp_moe - hidden(tp_moe, overlap, compute.2);
    let h = shape.hidden as f64;
    let topology = &machine.topology;
    let node = machine.cluster.gpus_per_node;
    let a2a = dispatch(topology, node, layout, r, 2.0 * h, d.options.ep_dispatcher);
    let etp = if layout.etp > 1 {
        2.0 * reduce_scatter(
            link_for(machine, 1, layout.etp),
            layout.etp,
            2.0 * h * r.routes,
        )
    } else {
        0.0
    };
    // A recomputed MoE layer (`moe`) runs its forward's dispatch and combine again.
    let pairs = match (d.step.recompute, d.options.moe_recompute) {
        (Recompute::Full, _) | (_, MoeRecompute::Layer) => 3.0,
        (Recompute::SelectiveLayer, _) => 2.5,
        _ => 2.0,
    };
    let all_to_alls = pairs * 2.0 * a2a;
    let exposed = if d.options.ep_overlap {
        // While they run beside compute, the dispatch and combine kernels hold
        // `COMM_SMS` of the chip's SMs, and the compute beside them runs on the rest.
        let share = stack_chip(machine, d.options.stack)
            .ok()
            .flatten()
            .map_or(0.0, |c| COMM_SMS / f64::from(c.sms));
        let beside = hidden(all_to_alls, 1.0, compute.0);
        all_to_alls - beside + beside * share / (1.0 - share)
    } else {
        all_to_alls
    };
    (compute, tp_moe, exposed + pairs * etp)
}

/// [`Unsharded`] for the step `d` under `layout` in the pipeline `kinds` ([`Detailed::kinds`]
/// of the layout): the slowest stage is found among one representative of each kind.
pub fn unsharded_in(
    machine: &Machine,
    shape: &Shape,
    layout: &Layout,
    d: &Detailed,
    opts: &TimeOptions,
    micro_batch: &MicroBatch,
    kinds: &StageKinds,
) -> Result<Unsharded> {
    let step = &d.step;
    let m = d.unscheduled_pipeline_in(layout, kinds)?;
    let (tp, cp, pp, dp) = (layout.tp, layout.cp, layout.pp, layout.dp);
    let (h, v) = (shape.hidden as f64, shape.vocab as f64);
    // This rank's tokens of a micro-batch: `b·s/CP`.
    let tokens = (step.micro_batch * step.seq_len) as f64 / layout.cp as f64;
    let peak = machine.peak_tflops * FLOPS_PER_TFLOPS;
    let precision = step.precision;
    let settings = d.options.stack.settings();
    let MicroBatch {
        layer,
        head,
        attention,
        moe,
    } = *micro_batch;
    if moe.is_some() {
        dispatcher_allowed(
            machine.cluster.gpus_per_node,
            layout,
            d.options.ep_dispatcher,
        )?;
    }
    let cp_per_layer = cp_exchange(
        machine,
        shape,
        layout,
        tokens,
        step.recompute,
        attention,
        settings.cp,
    );

    // TP collectives per layer per micro-batch, each of one BF16 activation; a recomputed
    // forward repeats its two (torchtitan's op-level policy keeps the reduce-scatters' outputs).
    // A recomputed forward repeats its collectives: all of them under full recomputation (and
    // MaxText's save-qkv, which recomputes both projections' outputs), half under
    // selective-layer, and under torchtitan's op-level policy the all-gathers before the
    // recomputed K and up projections (its reduce-scatters' outputs are kept): one all-reduce's
    // worth.
    let tp_calls = match step.recompute {
        Recompute::Full | Recompute::SaveQkv => 6.0,
        Recompute::SelectiveLayer | Recompute::SelectiveOp => 5.0,
        Recompute::None | Recompute::Selective => 4.0,
    };
    let tp_one = all_reduce(machine.topology.intra(), tp, 2.0 * tokens * h);
    let tp_layer = tp_calls * tp_one;
    let overlap = if overlaps(step, opts) {
        opts.tp_overlap
    } else {
        0.0
    };
    let tp_per_layer = tp_layer - hidden(tp_layer, overlap, layer.2);
    let moe_layer = moe.map(|(compute, r)| {
        moe_layer_comm(
            machine,
            shape,
            layout,
            d,
            &r,
            (tp_layer, tp_one, overlap),
            compute,
        )
    });
    // Each stage's MoE layers (the most of its run), from the stages' layers; none dense.
    let stage_list = if moe.is_some() {
        stage_layers(u64::from(shape.layers), pp, d.options.stages)?
    } else {
        Vec::new()
    };

    // The slowest stage: (index, compute, forward compute, tp and cp, ep, moe) per
    // micro-batch.
    let (slowest, stage_layers, compute, forward, tp_comm, cp_comm, ep_comm, stage_moe) = kinds
        .kinds()
        .iter()
        .map(|k| {
            let (i, l) = (k.index, k.layers);
            let last = i == pp - 1;
            let (head_all, head_fwd) = if last { head } else { (0.0, 0.0) };
            match moe_layer {
                Some(((all_moe, fwd_moe, _), tp_moe, ep_moe)) => {
                    let n_moe = crate::cost::moe::moe_layers_of_run(shape, &stage_list, i);
                    let (dense, m) = ((l - n_moe) as f64, n_moe as f64);
                    (
                        i,
                        k.layers,
                        dense * layer.0 + m * all_moe + head_all,
                        dense * layer.1 + m * fwd_moe + head_fwd,
                        dense * tp_per_layer + m * tp_moe,
                        l as f64 * cp_per_layer,
                        m * ep_moe,
                        n_moe,
                    )
                }
                None => {
                    let l = l as f64;
                    let all = l * layer.0 + if last { head.0 } else { 0.0 };
                    let fwd = l * layer.1 + if last { head.1 } else { 0.0 };
                    (
                        i,
                        k.layers,
                        all,
                        fwd,
                        l * tp_per_layer,
                        l * cp_per_layer,
                        0.0,
                        0,
                    )
                }
            }
        })
        .max_by(|a, b| {
            (a.2 + a.4 + a.5 + a.6)
                .total_cmp(&(b.2 + b.4 + b.5 + b.6))
                .then(b.0.cmp(&a.0))
        })
        .expect("a pipeline has at least one stage");

    let pp_send = if pp > 1 {
        let bytes = 2.0 * tokens * h
            / if step.sequence_parallel {
                tp as f64
            } else {
                1.0
            };
        // The pipeline's slowest boundary: across nodes once the pipeline spans more than one.
        let link = link_for(machine, tp * cp * dp, pp);
        send(link, bytes)
    } else {
        0.0
    };

    let first = slowest == 0;
    let last = slowest == pp - 1;
    let psi = stage_params_with(shape, tp, stage_layers, stage_moe, first, last);
    let experts = stage_expert_params(shape, layout, stage_moe);
    // With FP8, the stage's layer matrices cast to FP8 and transposed once a step: read 2,
    // write 2 bytes a parameter.
    let fp8_casts = if precision.is_fp8() {
        (2.0 + precision.weight_copy_bytes())
            * stage_layers as f64
            * shape.layer_matrix_params() as f64
            / tp as f64
    } else {
        0.0
    };
    let cluster_peak = machine.cluster.gpus as f64 * peak;
    let (full_layer, _) = layer_flops(shape, 1, step.seq_len, step.recompute);
    let moe_layers = shape.moe_layers();
    let hardware_layers = if moe_layers == 0 {
        f64::from(shape.layers) * full_layer
    } else {
        // An MoE layer multiplies the matrices a token goes through (k routed experts).
        let matrices = shape.moe_layer_matrix_params();
        let (mut full_moe, _) = layer_flops_with(shape, matrices, 1, step.seq_len, step.recompute);
        if d.options.moe_recompute == MoeRecompute::Layer {
            // `moe` runs the layer's MLP part again (router, k routed experts, shared experts;
            // none or selective recomputation left it): 2 FLOPs a parameter a token.
            let attention = without_shared(&moe_dense_part(shape)).layer_matrix_params();
            full_moe += 2.0 * matrices.saturating_sub(attention) as f64;
        }
        (u64::from(shape.layers) - moe_layers) as f64 * full_layer + moe_layers as f64 * full_moe
    };
    let hardware_per_token = hardware_layers + 3.0 * 2.0 * v * h;
    Ok(Unsharded {
        kinds: *kinds,
        m,
        compute,
        forward,
        tp_comm,
        cp_comm,
        pp_send,
        stage_layers,
        psi,
        experts,
        ep_comm,
        fp8_casts,
        flops: (
            model_flops_per_token(shape, step.seq_len),
            hardware_per_token,
            cluster_peak,
        ),
    })
}

/// [`Unscheduled`] from its [`Unsharded`] part, for `layout`'s ZeRO stage and replicas: the
/// data-parallel traffic and the optimizer step.
pub fn unscheduled_of(
    machine: &Machine,
    layout: &Layout,
    d: &Detailed,
    opts: &TimeOptions,
    part: &Unsharded,
) -> Unscheduled {
    let &Unsharded {
        m,
        compute,
        forward,
        stage_layers,
        psi,
        experts,
        fp8_casts,
        ..
    } = part;
    let (tp, m_f) = (layout.tp, m as f64);
    let grad_bytes = d.options.gradients.bytes();
    // ZeRO's shard group: DP/replicate × CP ranks, TP apart (ranks run TP, CP, DP from the
    // fastest-varying, the shard group the fastest part of DP); its replicas all-reduce the
    // shards of the gradients across groups `TP·shards` apart.
    let shards = layout.shard_group();
    let replicas = layout.replicate.max(1);
    let dp_link = link_for(machine, tp, shards);
    let replica_link = link_for(machine, tp * shards, replicas);
    let across = |bytes: f64| across_replicas(replica_link, replicas, shards, bytes);
    // Each transfer hides behind the compute it can overlap, on the one network link: the
    // forward's gathers behind a forward, the last gradient reduction behind the last
    // backward; reductions and gathers issued in every micro-batch (ZeRO 2 and 3) behind all
    // the step's compute after they are issued — as far as it lasts, never more.
    let hide_forward = opts.dp_overlap * forward;
    let hide_backward = opts.dp_overlap * (compute - forward);
    let hide_step = opts.dp_overlap * (m_f - 1.0) * compute;
    let exposed = |t: f64, window: f64| (t - window).max(0.0);
    let mut reduce = reduce_scatter(dp_link, shards, grad_bytes * psi) + across(grad_bytes * psi);
    let mut gather = reduce_scatter(dp_link, shards, 2.0 * psi);
    let mut all_reduced = all_reduce(dp_link, shards, grad_bytes * psi);
    // The routed experts' state over its own group, the expert data-parallel ranks `ETP·EP`
    // apart (its replicas `ETP·EP·EDP/replicate` apart), after the rest on the same link.
    let expert_shards = layout.expert_shard_group();
    if experts > 0.0 {
        let grid = layout.etp * layout.ep;
        let link = link_for(machine, grid, expert_shards);
        let replica_link = link_for(machine, grid * expert_shards, replicas);
        let across_experts =
            |bytes: f64| across_replicas(replica_link, replicas, expert_shards, bytes);
        let grads = grad_bytes * experts;
        reduce += reduce_scatter(link, expert_shards, grads) + across_experts(grads);
        gather += reduce_scatter(link, expert_shards, 2.0 * experts);
        all_reduced += all_reduce(link, expert_shards, grads);
    }
    let dp_comm = match layout.zero.get() {
        // Gradients all-reduced once over DP × CP, during the last micro-batch's backward.
        0 => exposed(all_reduced, hide_backward),
        // Distributed optimizer: gradients reduce-scattered during the last backward; the
        // updated weights all-gathered during the next step's first forward.
        1 => exposed(reduce, hide_backward) + exposed(gather, hide_forward),
        // Sharded gradients: reduce-scattered in every micro-batch's backward.
        2 => exposed(m_f * reduce, hide_step + hide_backward) + exposed(gather, hide_forward),
        // Sharded weights: gathered for each micro-batch's forward and backward too, a layer
        // ahead of the compute that needs it; the first layer's gather in each direction has
        // nothing before it to hide behind.
        _ => {
            let per_layer = |bytes: f64| bytes / (stage_layers.max(1) as f64);
            let mut first_layer = reduce_scatter(dp_link, shards, per_layer(2.0 * psi));
            if experts > 0.0 {
                let link = link_for(machine, layout.etp * layout.ep, expert_shards);
                first_layer += reduce_scatter(link, expert_shards, per_layer(2.0 * experts));
            }
            let unhidden = m_f * 2.0 * first_layer * opts.dp_overlap;
            unhidden
                + exposed(
                    m_f * (2.0 * gather + reduce) - unhidden,
                    opts.dp_overlap * m_f * compute,
                )
        }
    };

    let updated = shard(psi, layout.zero.shards_optimizer(), shards)
        + shard(experts, layout.zero.shards_optimizer(), expert_shards);
    let hbm = machine.topology.hbm_gbps * 1e9 * OPTIMIZER_HBM_EFFICIENCY;
    let optimizer = (updated * OPTIMIZER_BYTES_MOVED + fp8_casts) / hbm;
    Unscheduled {
        part: part.clone(),
        dp_comm,
        optimizer,
    }
}

/// The step time of `d` under its schedule, from the [`Unscheduled`] part of a step that
/// differs from it at most in its schedule, or why the schedule does not go with the layout:
/// each send between stages hides behind the next chunk's forward or backward, as far as it
/// lasts, and the bubble is `(p − 1)/v` micro-batches of the slowest stage.
pub fn scheduled(
    layout: &Layout,
    d: &Detailed,
    opts: &TimeOptions,
    base: &Unscheduled,
) -> Result<StepTime> {
    let breakdown = scheduled_breakdown(layout, d, opts, base)?;
    let step_seconds = breakdown.total();
    let tokens_per_second = d.step.global_batch_tokens as f64 / step_seconds;
    let (model_flops, hardware_flops, cluster_peak) = base.part.flops;
    Ok(StepTime {
        breakdown,
        step_seconds,
        tokens_per_second,
        mfu: model_flops * tokens_per_second / cluster_peak,
        hfu: hardware_flops * tokens_per_second / cluster_peak,
    })
}

/// Where the seconds of [`scheduled`]'s step go (what a search needs of it: its total is the
/// step time).
#[inline(always)]
pub fn scheduled_breakdown(
    layout: &Layout,
    d: &Detailed,
    opts: &TimeOptions,
    base: &Unscheduled,
) -> Result<Breakdown> {
    let step = &d.step;
    let (part, dp_comm, optimizer) = (&base.part, base.dp_comm, base.optimizer);
    step.interleaving_allowed_in(layout, &part.kinds, part.m)?;
    let pp = layout.pp;
    let (compute, forward) = (part.compute, part.forward);
    let per_micro_batch = compute + part.tp_comm + part.cp_comm + part.ep_comm;
    let chunks = step.schedule.chunks() as f64;
    let m_f = part.m as f64;
    let pp_comm = if pp > 1 {
        let one = part.pp_send;
        let ahead = one - hidden(one, opts.pp_overlap, forward / chunks);
        let back = one - hidden(one, opts.pp_overlap, (compute - forward) / chunks);
        m_f * chunks * (ahead + back)
    } else {
        0.0
    };
    Ok(Breakdown {
        compute: m_f * compute,
        tp_comm: m_f * part.tp_comm,
        cp_comm: m_f * part.cp_comm,
        pp_comm,
        dp_comm,
        bubble: (pp - 1) as f64 / chunks * per_micro_batch,
        optimizer,
        ep_comm: m_f * part.ep_comm,
    })
}

/// What the detailed time model says of a design's run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunTime {
    /// The step.
    pub step: StepTime,
    /// Days of compute at the step's pace, failures aside.
    pub compute_days: f64,
    /// Days per token including failures: `step_seconds / (B · goodput · 86,400)`.
    pub days_per_token: f64,
    /// What failures cost.
    pub outage: Outage,
}

impl TimeModel {
    /// The run's time for `tokens`, or `None` under the plate model; an error if the time model
    /// needs a detailed step the memory model does not give, or the step does not fit.
    pub fn run_time(
        &self,
        machine: &Machine,
        shape: &Shape,
        layout: &Layout,
        memory: &MemoryModel,
        tokens: u64,
    ) -> Result<Option<RunTime>> {
        self.run_time_cached(machine, shape, layout, memory, tokens, None)
    }

    /// [`TimeModel::run_time`], taking each micro-batch's compute from `cache` when given
    /// (the same answer, worked out once for the configurations that share it).
    pub fn run_time_cached(
        &self,
        machine: &Machine,
        shape: &Shape,
        layout: &Layout,
        memory: &MemoryModel,
        tokens: u64,
        cache: Option<&mut MicroBatchCache>,
    ) -> Result<Option<RunTime>> {
        let TimeModel::Detailed(opts) = self else {
            return Ok(None);
        };
        let MemoryModel::Detailed(d) = memory else {
            return Err(Error::invalid(
                "--time",
                "detailed",
                "--time detailed together with --memory detailed, which defines the training step",
            ));
        };
        let micro_batch = match cache {
            Some(cache) => cache.get(machine, shape, layout, d, opts)?,
            None => MicroBatch::of(machine, shape, layout, d, opts)?,
        };
        let step = step_time_of(machine, shape, layout, d, opts, &micro_batch)?;
        run_of(machine, shape, d, step, tokens).map(Some)
    }

    /// The [`Unsharded`] part of the step `d` under `layout` in the pipeline `kinds`
    /// ([`Detailed::kinds`] of the layout), shared by every schedule of the step and every ZeRO
    /// stage and replica count of the layout's degrees, or `None` under the plate model; each
    /// micro-batch's compute from `cache`.
    pub fn unsharded_in(
        &self,
        machine: &Machine,
        shape: &Shape,
        layout: &Layout,
        d: &Detailed,
        kinds: &StageKinds,
        cache: &mut MicroBatchCache,
    ) -> Result<Option<Unsharded>> {
        let TimeModel::Detailed(opts) = self else {
            return Ok(None);
        };
        let micro_batch = cache.get(machine, shape, layout, d, opts)?;
        unsharded_in(machine, shape, layout, d, opts, &micro_batch, kinds).map(Some)
    }

    /// The [`Unscheduled`] part of the step from its [`Unsharded`] part ([`unscheduled_of`]),
    /// or `None` under the plate model.
    pub fn unscheduled_of(
        &self,
        machine: &Machine,
        layout: &Layout,
        d: &Detailed,
        part: &Unsharded,
    ) -> Option<Unscheduled> {
        let TimeModel::Detailed(opts) = self else {
            return None;
        };
        Some(unscheduled_of(machine, layout, d, opts, part))
    }

    /// [`RunTime::days_per_token`] of the step `d` from the [`Unscheduled`] part of a step
    /// that differs from it at most in its schedule, for a run whose failures leave `goodput`
    /// ([`Outage::goodput`], the same for every run of a shape on a machine): what
    /// [`TimeModel::run_time_on`] gives, without the rest of the run.
    pub fn days_per_token_on(
        &self,
        layout: &Layout,
        d: &Detailed,
        base: &Unscheduled,
        goodput: f64,
    ) -> Result<Option<f64>> {
        let TimeModel::Detailed(opts) = self else {
            return Ok(None);
        };
        let step_seconds = scheduled_breakdown(layout, d, opts, base)?.total();
        Ok(Some(days_per_token(step_seconds, d, goodput)))
    }

    /// [`TimeModel::run_time`] of the step `d` from the [`Unscheduled`] part of a step that
    /// differs from it at most in its schedule (the same answer; `d`'s stack must run its
    /// schedule, [`Detailed::schedule_allowed`]).
    pub fn run_time_on(
        &self,
        machine: &Machine,
        shape: &Shape,
        layout: &Layout,
        d: &Detailed,
        base: &Unscheduled,
        tokens: u64,
    ) -> Result<Option<RunTime>> {
        let TimeModel::Detailed(opts) = self else {
            return Ok(None);
        };
        let step = scheduled(layout, d, opts, base)?;
        run_of(machine, shape, d, step, tokens).map(Some)
    }
}

/// Days per token at the step time `step` of `d` when failures leave `goodput`:
/// `step_seconds / (B · goodput · 86,400)`.
fn days_per_token(step_seconds: f64, d: &Detailed, goodput: f64) -> f64 {
    step_seconds / d.step.global_batch_tokens as f64 / goodput / SECONDS_PER_DAY
}

/// The run of `tokens` at the step time `step`: its compute days, and its days per token with
/// the time failures cost.
fn run_of(
    machine: &Machine,
    shape: &Shape,
    d: &Detailed,
    step: StepTime,
    tokens: u64,
) -> Result<RunTime> {
    let compute_seconds = tokens as f64 / step.tokens_per_second;
    let outage =
        machine
            .reliability
            .outage(shape.params(), machine.cluster.gpus, compute_seconds)?;
    let days_per_token = days_per_token(step.step_seconds, d, outage.goodput);
    Ok(RunTime {
        step,
        compute_days: compute_seconds / SECONDS_PER_DAY,
        days_per_token,
        outage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::cost::memory::detailed::{stage_params, Options};
    use crate::cost::step::{Schedule, Step};
    use crate::model::layout::ZeroStage;
    use crate::model::preset;

    fn flat(eff: f64) -> TimeOptions {
        let point = crate::cost::efficiency::Point {
            width: 1.0,
            efficiency: eff,
        };
        TimeOptions {
            efficiency: EfficiencyCurve::new(vec![point]).unwrap(),
            calibration: Calibration::default(),
            tp_overlap: 0.0,
            pp_overlap: 0.0,
            dp_overlap: 0.0,
        }
    }

    fn detailed(recompute: Recompute, schedule: Schedule) -> Detailed {
        Detailed {
            step: Step {
                micro_batch: 1,
                seq_len: 8192,
                recompute,
                sequence_parallel: true,
                schedule,
                tp_comm_overlap: false,
                precision: crate::cost::precision::Precision::Bf16,
                global_batch_tokens: 16 * 1024 * 1024,
            },
            options: Options::for_stack(Stack::Eager),
        }
    }

    fn time(model: &str, tp: u64, pp: u64, zero: u8, d: Detailed, opts: &TimeOptions) -> StepTime {
        let b = Brief::default();
        let s = preset(model).unwrap();
        let l = Layout::new(&b, &s, tp, pp, ZeroStage::new(zero).unwrap()).unwrap();
        step_time(&b.machine(), &s, &l, &d, opts).unwrap()
    }

    #[test]
    fn the_unsharded_part_of_one_set_of_degrees_gives_every_zero_stage_and_replica_count_its_time_to_the_bit(
    ) {
        // The step time before the sharded state's traffic and optimizer, worked out under ZeRO
        // 0 with one shard group and finished for each ZeRO stage and replica count of the
        // same TP, CP, PP and DP, is each layout's own: 70B and 405B, each recomputation and
        // precision the stack trains in, with every overlap in play.
        use crate::cost::precision::Precision;
        use crate::model::layout::every_sharding;
        let machine = Brief::default().machine();
        let stack = Stack::MegatronTe;
        let opts = TimeOptions::for_stack(stack);
        let mut compared = 0;
        for (model, tp, cp, pp) in [("70b", 8, 1, 4), ("70b", 4, 2, 1), ("405b", 8, 1, 16)] {
            let s = preset(model).unwrap();
            let layouts = every_sharding(&s, tp, cp, pp);
            let first = &layouts[0];
            for (recompute, precision) in itertools::iproduct!(Recompute::ALL, Precision::ALL) {
                let d = Detailed {
                    step: Step {
                        precision,
                        tp_comm_overlap: true,
                        ..detailed(recompute, Schedule::OneFOneB).step
                    },
                    options: Options::for_stack(stack),
                };
                let Ok(kinds) = d.kinds(&s, first) else {
                    continue;
                };
                let Ok(micro_batch) = MicroBatch::of(&machine, &s, first, &d, &opts) else {
                    continue;
                };
                let Ok(part) = unsharded_in(&machine, &s, first, &d, &opts, &micro_batch, &kinds)
                else {
                    continue;
                };
                for l in &layouts {
                    let own = unscheduled(&machine, &s, l, &d, &opts, &micro_batch);
                    let of = unscheduled_of(&machine, l, &d, &opts, &part);
                    assert_eq!(of, own.unwrap(), "{model} {l:?} {d:?}");
                    compared += 1;
                }
            }
        }
        assert!(compared >= 300, "{compared}");
    }

    #[test]
    fn a_step_that_overlaps_tp_communication_hides_it_behind_chunked_gemms_and_one_that_does_not_waits_for_it(
    ) {
        // Megatron-core with TE, 70B at TP 8 × DP 256, selective recomputation: 8 micro-batches.
        let step = |tp_comm_overlap| Detailed {
            step: Step {
                tp_comm_overlap,
                ..detailed(Recompute::Selective, Schedule::OneFOneB).step
            },
            options: Options::for_stack(Stack::MegatronTe),
        };
        let opts = TimeOptions::for_stack(Stack::MegatronTe);
        let on = time("70b", 8, 1, 1, step(true), &opts).breakdown;
        let off = time("70b", 8, 1, 1, step(false), &opts).breakdown;
        // Off: four collectives a layer, each of one BF16 activation over NVLink, all exposed.
        let b = Brief::default();
        let one = all_reduce(b.machine().topology.intra(), 8, 2.0 * 8192.0 * 8192.0);
        let m = 16.0 * 1024.0 * 1024.0 / (8192.0 * 256.0);
        assert!((off.tp_comm - m * 80.0 * 4.0 * one).abs() < 1e-9 * off.tp_comm);
        // On: every collective hidden behind the layer's GEMMs (the stack hides all of it, and
        // a layer's GEMMs last longer than its collectives at this size) ...
        assert_eq!(on.tp_comm, 0.0);
        // ... and the projections run in 8 chunks of rows, at a lower fraction of the peak.
        assert!(on.compute > off.compute, "{} {}", on.compute, off.compute);
        // Here the overlap is worth it: what it hides outweighs the chunks' cost.
        assert!(on.total() < off.total());
        // A stack without the overlap (or a step without sequence parallelism) refuses it.
        let no = Detailed {
            options: Options::for_stack(Stack::Llama3),
            ..step(true)
        };
        let s = preset("70b").unwrap();
        let l = Layout::new(&b, &s, 8, 1, ZeroStage::new(1).unwrap()).unwrap();
        let e = step_time(&b.machine(), &s, &l, &no, &opts).unwrap_err();
        assert!(
            e.to_string().contains(
                "--tp-comm-overlap = on: off: the llama3 stack has no TP-communication overlap"
            ),
            "{e}"
        );
        let without_sp = Detailed {
            step: Step {
                sequence_parallel: false,
                ..step(true).step
            },
            ..step(true)
        };
        let e = step_time(&b.machine(), &s, &l, &without_sp, &opts).unwrap_err();
        assert!(
            e.to_string().contains("off without sequence parallelism"),
            "{e}"
        );
    }

    #[test]
    fn model_flops_are_6n_plus_6_l_s_h_over_the_matrices() {
        let s = preset("70b").unwrap();
        let not_multiplied = 128_256.0 * 8192.0 + 161.0 * 8192.0; // embedding, 2L + 1 norms
        let want = 6.0 * (70_553_706_496.0 - not_multiplied) + 6.0 * 80.0 * 8192.0 * 8192.0;
        assert_eq!(model_flops_per_token(&s, 8192), want);
    }

    #[test]
    fn compute_of_the_70b_at_tp_8_without_parallel_overheads_worked_by_hand() {
        // TP 8, PP 1, DP 256: m = 2048 sequences / 256 = 8 micro-batches of 8,192 tokens.
        // Per token and layer forward: 2·(855,654,400 − 16,384)/8 + 2·8192·8192/8 = 230,686,720.
        // No recompute: ×3 per layer ×80 layers, plus the head 3·2·128,256·8192/8 = 788,004,864.
        // Per micro-batch: 8192 × (80 × 692,060,160 + 788,004,864) = 4.6000e14 FLOPs,
        // at 989e12 × 0.5: 0.93023 s; ×8 = 7.4418 s.
        let t = time(
            "70b",
            8,
            1,
            1,
            detailed(Recompute::None, Schedule::OneFOneB),
            &flat(0.5),
        );
        let per_mb = 8192.0 * (80.0 * 692_060_160.0 + 788_004_864.0) / (989e12 * 0.5);
        assert!((t.breakdown.compute - 8.0 * per_mb).abs() < 1e-9);
        assert_eq!(t.breakdown.bubble, 0.0);
        assert_eq!(t.breakdown.pp_comm, 0.0);
    }

    #[test]
    fn tp_communication_is_four_all_reduces_a_layer_six_with_full_recompute() {
        // One all-reduce of 2·8192·8192 B over 8 GPUs at 370 GB/s: 634.81 µs; 80 layers, m = 8.
        let one = 2.0 * 7.0 / 8.0 * 2.0 * 8192.0 * 8192.0 / 370e9 + 2.0 * 7.0 * 3e-6;
        let none = time(
            "70b",
            8,
            1,
            1,
            detailed(Recompute::None, Schedule::OneFOneB),
            &flat(0.5),
        );
        assert!((none.breakdown.tp_comm - 8.0 * 80.0 * 4.0 * one).abs() < 1e-9);
        let full = time(
            "70b",
            8,
            1,
            1,
            detailed(Recompute::Full, Schedule::OneFOneB),
            &flat(0.5),
        );
        assert!((full.breakdown.tp_comm - 8.0 * 80.0 * 6.0 * one).abs() < 1e-9);
    }

    #[test]
    fn the_bubble_is_p_minus_1_over_v_micro_batches_of_the_slowest_stage() {
        let one = time(
            "70b",
            8,
            4,
            1,
            detailed(Recompute::Full, Schedule::OneFOneB),
            &flat(0.5),
        );
        let m = 32.0; // DP = 64: 2048 / 64
        let per_mb = (one.breakdown.compute + one.breakdown.tp_comm) / m;
        assert!((one.breakdown.bubble - 3.0 * per_mb).abs() < 1e-9);
        let two = time(
            "70b",
            8,
            4,
            1,
            detailed(Recompute::Full, Schedule::Interleaved(2)),
            &flat(0.5),
        );
        assert!((two.breakdown.bubble - 1.5 * per_mb).abs() < 1e-9);
    }

    #[test]
    fn the_optimizer_step_is_bound_by_memory_bandwidth() {
        // ZeRO 1 at TP 8, PP 1, DP 256: Ψ = (80·(P_layer − 2h) + 2·V·h)/8 + 80·2h + h per GPU,
        // of which 1/256 is updated here; 28 B each at 0.6 × 3,350 GB/s.
        let s = preset("70b").unwrap();
        let t = time(
            "70b",
            8,
            1,
            1,
            detailed(Recompute::Full, Schedule::OneFOneB),
            &flat(0.5),
        );
        let psi = stage_params(&s, 8, 80, true, true);
        assert!((t.breakdown.optimizer - psi / 256.0 * 28.0 / (3350e9 * 0.6)).abs() < 1e-12);
    }

    #[test]
    fn zero_3_moves_one_and_a_half_times_the_bytes_of_plain_data_parallelism() {
        let mut opts = flat(0.5);
        opts.dp_overlap = 0.0;
        let d = Detailed {
            step: Step {
                global_batch_tokens: 256 * 8192,
                ..detailed(Recompute::Full, Schedule::OneFOneB).step
            },
            options: Options {
                gradients: crate::cost::memory::detailed::GradientPrecision::Bf16,
                ..Options::for_stack(Stack::Eager)
            },
        };
        // m = 1, BF16 gradients: ZeRO 0 all-reduces 2Ψ (2 × (n−1)/n × 2Ψ on the wire), ZeRO 3
        // all-gathers 2Ψ twice and reduce-scatters 2Ψ once (3 × (n−1)/n × 2Ψ).
        let z0 = time("70b", 8, 1, 0, d, &opts).breakdown.dp_comm;
        let z3 = time("70b", 8, 1, 3, d, &opts).breakdown.dp_comm;
        assert!((z3 / z0 - 1.5).abs() < 1e-3, "{}", z3 / z0);
    }

    #[test]
    fn pipeline_sends_worked_by_hand() {
        // 70B, TP 8 + SP, PP 4, DP 64: the pipeline spans 8·64·4 GPUs, so its sends cross the
        // network; the 8 TP ranks of a node carry one stage, one member of the boundary a node
        // (bus bandwidth 46 GB/s). A send is 2·8192·8192/8 = 16,777,216 B: 10 µs + 364.7 µs.
        // 32 micro-batches × 1 chunk × 2 directions.
        let d = detailed(Recompute::Full, Schedule::OneFOneB);
        let t = time("70b", 8, 4, 1, d, &flat(0.5));
        let send = 10e-6 + 16_777_216.0 / 46e9;
        assert!((t.breakdown.pp_comm - 32.0 * 2.0 * send).abs() < 1e-12);
    }

    #[test]
    fn a_data_parallel_group_uses_the_nics_of_all_its_members_in_a_node() {
        // TP 1, PP 1: the 2,048-way DP ring has 8 members a node, 8 NICs: 8 × 46 = 368 GB/s,
        // under NVLink's 370. ZeRO 0 all-reduces 4·Ψ bytes of FP32 gradients, unhidden.
        let b = Brief::default();
        let s = preset("8b").unwrap();
        let l = Layout::new(&b, &s, 1, 1, ZeroStage::new(0).unwrap()).unwrap();
        let mut opts = flat(0.5);
        opts.dp_overlap = 0.0;
        let mut d = detailed(Recompute::Full, Schedule::OneFOneB);
        d.step.sequence_parallel = false;
        let t = step_time(&b.machine(), &s, &l, &d, &opts).unwrap();
        let psi = stage_params(&s, 1, 32, true, true);
        let link = Link {
            bytes_per_second: 368e9,
            latency: 10e-6,
        };
        let want = all_reduce(link, 2048, 4.0 * psi);
        assert!((t.breakdown.dp_comm - want).abs() < 1e-9 * want);
    }

    #[test]
    fn zero_2_reduces_gradients_in_every_micro_batch_zero_1_once() {
        let mut opts = flat(0.5);
        opts.dp_overlap = 0.0;
        let d = detailed(Recompute::Full, Schedule::OneFOneB);
        let z1 = time("70b", 8, 4, 1, d, &opts).breakdown.dp_comm;
        let z2 = time("70b", 8, 4, 2, d, &opts).breakdown.dp_comm;
        // m = 32: ZeRO 2 pays 31 more gradient reduce-scatters than ZeRO 1.
        assert!(z2 > 10.0 * z1, "{z1} {z2}");
    }

    #[test]
    fn mfu_follows_from_tokens_per_second() {
        let t = time(
            "70b",
            8,
            4,
            1,
            detailed(Recompute::Full, Schedule::OneFOneB),
            &TimeOptions::default(),
        );
        let s = preset("70b").unwrap();
        let mfu = model_flops_per_token(&s, 8192) * t.tokens_per_second / (2048.0 * 989e12);
        assert!((t.mfu - mfu).abs() < 1e-12);
        assert!(
            t.hfu > t.mfu && t.mfu > 0.1 && t.mfu < 0.6,
            "{} {}",
            t.mfu,
            t.hfu
        );
        // Without recomputation the hardware runs the model's FLOPs (and the head's once more
        // than a lookup would): HFU is still at least MFU.
        let d = detailed(Recompute::None, Schedule::OneFOneB);
        let none = time("70b", 8, 4, 1, d, &TimeOptions::default());
        assert!(none.hfu >= none.mfu, "{} {}", none.hfu, none.mfu);
    }

    #[test]
    fn zero_3_exposes_its_first_layer_gathers_and_the_rest_only_past_the_compute() {
        // 8B at TP 1, PP 1 on 2,048 GPUs, ZeRO 3, m = 1, dp_overlap 1: the step's gathers and
        // reduction hide behind its compute as far as it lasts; the first layer's gather in each
        // direction (2Ψ/32 bytes) does not.
        let b = Brief::default();
        let s = preset("8b").unwrap();
        let l = Layout::new(&b, &s, 1, 1, ZeroStage::new(3).unwrap()).unwrap();
        let mut opts = flat(0.5);
        opts.dp_overlap = 1.0;
        let mut d = detailed(Recompute::Full, Schedule::OneFOneB);
        d.step.sequence_parallel = false;
        d.step.global_batch_tokens = 2048 * 8192;
        let t = step_time(&b.machine(), &s, &l, &d, &opts).unwrap();
        let psi = stage_params(&s, 1, 32, true, true);
        let link = link_for(&b.machine(), 1, 2048);
        let first = reduce_scatter(link, 2048, 2.0 * psi / 32.0);
        let all =
            2.0 * reduce_scatter(link, 2048, 2.0 * psi) + reduce_scatter(link, 2048, 4.0 * psi);
        let want = 2.0 * first + (all - 2.0 * first - t.breakdown.compute).max(0.0);
        assert!(
            (t.breakdown.dp_comm - want).abs() < 1e-12,
            "{} vs {want}",
            t.breakdown.dp_comm
        );
        assert!(t.breakdown.dp_comm >= 2.0 * first);
    }

    #[test]
    fn a_send_hides_behind_the_chunk_of_its_own_direction() {
        // With full overlap and sends far shorter than any chunk, nothing is exposed; without
        // overlap every send is.
        let mut opts = flat(0.5);
        opts.pp_overlap = 1.0;
        let d = detailed(Recompute::Full, Schedule::OneFOneB);
        assert_eq!(time("70b", 8, 4, 1, d, &opts).breakdown.pp_comm, 0.0);
        opts.pp_overlap = 0.0;
        let send = 10e-6 + 16_777_216.0 / 46e9;
        let exposed = time("70b", 8, 4, 1, d, &opts).breakdown.pp_comm;
        assert!((exposed - 32.0 * 2.0 * send).abs() < 1e-12);
    }
}
