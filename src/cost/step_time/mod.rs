//! How the schedule composes a step's time, in the three parts a search shares across
//! configurations: one micro-batch's compute on a rank ([`micro_batch`]), the slowest stage's
//! compute and traffic per micro-batch ([`stage`]: [`stage::Unsharded`]), and in this file the
//! data-parallel traffic and the optimizer ([`Unscheduled`]) and the pipeline's sends and
//! bubble ([`scheduled`]); [`options`] holds the time model's settings. Uses `step`, `chip`,
//! `links` and `memory` of [`crate::cost`].
//!
//! How long a training step takes and where each second goes.
//!
//! Per micro-batch on pipeline stage `i` with `lᵢ` layers, TP degree `t`, `b·s` tokens:
//!
//! - **Compute**, under the plan's software stack ([`crate::cost::step::stack`]): summed over
//!   operations ([`crate::cost::chip::operations`]: each GEMM at its shape on the GPU's kernel figures,
//!   attention, element-wise traffic, and what each recomputation mode repeats); for the
//!   `eager` stack, hardware FLOPs over `peak × efficiency(h/t)` ([`crate::cost::chip::efficiency`]):
//!   per token and layer the forward runs `2·(P_layer − 2h)/t` matrix FLOPs and `2·s·h/t` of
//!   causal attention; backward twice the forward; recomputation adds what its mode repeats.
//!   The last stage adds the output head, `3 · 2·V·h/t` per token.
//! - **TP communication** on NVLink: two all-reduces of `2·b·s·h` bytes per layer in forward, two
//!   in backward, and those a recomputed forward repeats (with sequence parallelism each is a
//!   reduce-scatter plus an all-gather, the same time). A step that overlaps them
//!   ([`crate::cost::step::Step::tp_comm_overlap`]: Megatron-core's userbuffers, with sequence parallelism) runs
//!   each projection in `t` chunks of rows ([`crate::cost::chip::operations`]) and hides a fraction
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
//!   19.3 ms on an H200, 2.9 of its 4.8 TB/s), `28 − 2·(12 − s)` with a lower-precision state
//!   of `s` bytes ([`crate::cost::step::recipe`]). With `--fp8-params` the weights' all-gather
//!   moves the layers' matrices in FP8.
//!
//! A step's seconds are the sum of those parts; tokens per second follow from the global batch,
//! MFU from model FLOPs `6·N_matrix + 6·L·s·h` per token (causal attention, no recomputation,
//! the input embedding's lookup and the norms left out) over the cluster's peak. Days are the compute time over goodput ([`crate::cost::run::reliability`]):
//! `days = D · step_seconds / (B · goodput · 86,400)`, linear in the tokens D.

pub mod micro_batch;
pub mod options;
pub mod stage;

use serde::{Deserialize, Serialize};

use crate::cost::links::exchanges::across_replicas;
use crate::cost::links::hidden;
use crate::cost::links::link_for;
use crate::cost::links::topology::{all_reduce, reduce_scatter};
use crate::cost::memory::plate::shard;
use crate::cost::step::detailed::Detailed;
use crate::cost::step::Schedule;
use crate::cost::step_time::micro_batch::MicroBatch;
use crate::cost::step_time::options::TimeOptions;
use crate::cost::step_time::stage::unsharded_in;
use crate::cost::step_time::stage::Unsharded;
use crate::cost::Machine;
use crate::error::Result;
use crate::model::layout::Layout;
use crate::model::Shape;

/// Bytes AdamW moves per parameter in its step (calibration: about 28).
pub const OPTIMIZER_BYTES_MOVED: f64 = 28.0;
/// Fraction of the HBM bandwidth the optimizer step reaches (calibration: 2.9 of 4.8 TB/s).
pub const OPTIMIZER_HBM_EFFICIENCY: f64 = 0.6;

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
    /// A mixture of experts' waits for the host's launches of what no CUDA graph captures,
    /// past the GPU's work ([`crate::cost::step::graphs`]; absent for none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host: f64,
    /// Waits for offloaded activations' copies to and from host memory, past the compute
    /// they hide behind (`--offload-activations`; absent for none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offload: f64,
    /// What an offloaded optimizer's host part (`--offload-optimizer`: gradients to the host,
    /// the CPU's Adam, weights back, pipelined) adds past the GPU's own share of the optimizer
    /// step, [`crate::cost::step::optimizer_offload::added`] (absent for none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub optimizer_offload: f64,
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
            + self.host
            + self.offload
            + self.optimizer_offload
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
    d.hybrid_schedule_allowed(shape)?;
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
    optimizer_offload: f64,
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
        fp8_matrices,
        matrices,
        newton_schulz,
        ..
    } = part;
    let muon = d.options.optimizer == crate::cost::step::recipe::Optimizer::Muon;
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
    // The weights gathered, BF16 but for FP8 weights' matrices (`--fp8-params`: the recipe's
    // bytes, [`crate::cost::step::recipe::Fp8Recipe::gathered_weight_bytes`]).
    let sharded_weights = layout.zero.shards_weights();
    let fp8_saved = d.recipe().map_or(0.0, |r| {
        (2.0 - r.gathered_weight_bytes(sharded_weights)) * fp8_matrices
    });
    let weights = 2.0 * psi - fp8_saved;
    let mut gather = reduce_scatter(dp_link, shards, weights);
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
        // Muon's layer-wise distributed optimizer (Megatron-core's `dist_muon`): gradients
        // all-reduced, each rank steps whole matrices, the updated weights all-gathered.
        1 if muon => exposed(all_reduced, hide_backward) + exposed(gather, hide_forward),
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
            let mut first_layer = reduce_scatter(dp_link, shards, per_layer(weights));
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
    // Each byte of state a parameter saved (master weights, moments) is read and written
    // once less: 28 − 2·(12 − s) bytes with s the state's bytes
    // ([`crate::cost::step::detailed::Options::optimizer_bytes`]).
    let moved = OPTIMIZER_BYTES_MOVED - 2.0 * (12.0 - d.options.optimizer_bytes());
    // Muon's matrices read and write one moment fewer, and run their Newton–Schulz
    // iterations, each data-parallel rank its share of the stage's under ZeRO 1.
    let updated_matrices = shard(matrices, layout.zero.shards_optimizer(), shards)
        + shard(experts, layout.zero.shards_optimizer(), expert_shards);
    let fewer = 2.0 * (d.options.optimizer_bytes() - d.options.matrix_optimizer_bytes());
    // `dist_muon` gives each rank whole matrices: its share, and at least the largest.
    let share = |(all, largest): (f64, f64), group: u64| {
        if layout.zero.shards_optimizer() {
            (all / group.max(1) as f64).max(largest.min(all))
        } else {
            all
        }
    };
    let newton_schulz = share(newton_schulz[0], shards) + share(newton_schulz[1], expert_shards);
    // An offloaded fraction F steps on the CPU instead, its copies and CPU step pipelined
    // beside the GPU's share ([`crate::cost::step::optimizer_offload`]).
    let f = d.options.offload_optimizer.get();
    let optimizer =
        (updated * (1.0 - f) * moved - updated_matrices * (1.0 - f) * fewer + fp8_casts) / hbm
            + newton_schulz;
    let host = (
        machine.topology.host_link_gbps * 1e9,
        machine.topology.host_memory_gbps * 1e9,
    );
    let optimizer_offload =
        crate::cost::step::optimizer_offload::added(optimizer, updated, f, moved, host);
    Unscheduled {
        part: part.clone(),
        dp_comm,
        optimizer,
        optimizer_offload,
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
    let optimizer_offload = base.optimizer_offload;
    step.interleaving_allowed_in(layout, &part.kinds, part.m)?;
    let pp = layout.pp;
    let (compute, forward) = (part.compute, part.forward);
    let per_micro_batch = compute + part.tp_comm + part.cp_comm + part.ep_comm + part.host;
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
        bubble: bubble(
            step.schedule,
            pp,
            per_micro_batch,
            forward,
            forward * part.weight_share,
        ),
        optimizer,
        ep_comm: m_f * part.ep_comm,
        host: m_f * part.host,
        offload: m_f * part.offload,
        optimizer_offload,
    })
}

/// The pipeline's fill and drain, seconds, over `pp` stages whose slowest takes `t` a
/// micro-batch, `f` of it its forward and `w` the weight gradients of its backward:
///
/// - 1F1B and interleaving over `v` chunks: `(p − 1)·t/v` (Narayanan et al. 2021, §2.2);
/// - ZB-V: `(p − 1)·max(0, t − 3w)/2`, ZB-H2's bubble `(p − 1)(F + B − 2W)` (Qi et al. 2024,
///   Table 2, B the input gradient alone, `t = F + B + W`) over the two chunks a GPU runs; 0
///   where the three passes take as long as each other, as the paper's §6 states;
/// - DualPipeV: `(P/2 − 1)(F&B + B − 3W)` over `P = 2p` chunks of half a GPU's time each
///   (DeepSeek-V3 Table 2 and the DualPipe README, B a full backward, F&B a forward chunk
///   and a backward chunk run together): `(p − 1)·max(0, t + (t − f) − 3w)/2`, the pair
///   taking what the two take one after the other (its all-to-alls hidden where the stack
///   overlaps them, [`crate::cost::links::exchanges::moe_layer_comm`]).
pub fn bubble(schedule: Schedule, pp: u64, t: f64, f: f64, w: f64) -> f64 {
    let fills = (pp - 1) as f64;
    match schedule {
        Schedule::OneFOneB | Schedule::Interleaved(_) => fills / schedule.chunks() as f64 * t,
        Schedule::ZeroBubbleV => fills * (t - 3.0 * w).max(0.0) / 2.0,
        Schedule::DualPipeV => fills * (2.0 * t - f - 3.0 * w).max(0.0) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::cost::chip::calibration::Calibration;
    use crate::cost::chip::efficiency::EfficiencyCurve;
    use crate::cost::chip::flops::model_flops_per_token;
    use crate::cost::links::link_for;
    use crate::cost::links::topology::Link;
    use crate::cost::step::detailed::Options;
    use crate::cost::step::pipeline::stage_params;
    use crate::cost::step::stack::Stack;
    use crate::cost::step::Recompute;
    use crate::cost::step::{Schedule, Step};
    use crate::cost::step_time::micro_batch::MicroBatch;
    use crate::cost::step_time::options::TimeOptions;
    use crate::cost::step_time::stage::unsharded_in;
    use crate::model::layout::ZeroStage;
    use crate::model::preset;

    fn flat(eff: f64) -> TimeOptions {
        let point = crate::cost::chip::efficiency::Point {
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
                precision: crate::cost::step::precision::Precision::Bf16,
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
        use crate::cost::step::precision::Precision;
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
    fn latent_attention_gathers_its_latents_not_the_hidden_size() {
        // DeepSeek-V3's attention on 4 dense layers at TP 8 with sequence parallelism, BF16:
        // of a layer's 8 gathers and reduce-scatters of 2·8192·h bytes, the attention input's
        // gather forward and its gradient's reduce-scatter backward move the latents and the
        // shared RoPE key, 1,536 + 512 + 64 = 2,112 a token: 6 of h and 2 of 2,112, each
        // 7α + 7/8 · S/B at 370 GB/s and α = 3 µs; m = 8 micro-batches.
        let b = Brief::default();
        let s = crate::model::testing::latent(4);
        let l = Layout::new(&b, &s, 8, 1, ZeroStage::new(1).unwrap()).unwrap();
        let mut d = detailed(Recompute::None, Schedule::OneFOneB);
        d.options = Options::for_stack(Stack::MegatronTe);
        let t = step_time(&b.machine(), &s, &l, &d, &flat(0.5)).unwrap();
        let rs = |width: f64| 7.0 * 3e-6 + 7.0 / 8.0 * 2.0 * 8192.0 * width / 370e9;
        let layer = 6.0 * rs(7_168.0) + 2.0 * rs(2_112.0);
        let want = 8.0 * 4.0 * layer;
        assert!(
            (t.breakdown.tp_comm - want).abs() < 1e-9 * want,
            "{} {want}",
            t.breakdown.tp_comm
        );
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
    fn below_bf16_the_tp_all_gathers_move_the_quantized_inputs() {
        // With sequence parallelism an all-reduce's worth is a reduce-scatter of the BF16
        // output and an all-gather of an input, which Transformer Engine gathers quantized.
        // 70B at TP 8, no overlap, 80 layers, m = 8: each ring pass moves 7/8 of 8192² elements
        // at 370 GB/s after 7 latencies of 3 µs; under FP8 the gather moves 1 byte an element.
        use crate::cost::step::precision::Precision;
        let pass = |bytes: f64| 7.0 / 8.0 * bytes * 8192.0 * 8192.0 / 370e9 + 7.0 * 3e-6;
        let at = |precision| {
            let d = Detailed {
                step: Step {
                    precision,
                    ..detailed(Recompute::None, Schedule::OneFOneB).step
                },
                options: Options::for_stack(Stack::MegatronTe),
            };
            time("70b", 8, 1, 1, d, &flat(0.5)).breakdown.tp_comm
        };
        let per_step = 8.0 * 80.0 * 4.0;
        assert!((at(Precision::Bf16) - per_step * 2.0 * pass(2.0)).abs() < 1e-9);
        assert!((at(Precision::Fp8) - per_step * (pass(2.0) + pass(1.0))).abs() < 1e-9);
    }

    #[test]
    fn the_v_schedules_bubbles_are_their_papers_tables() {
        // F = B = W = 1 (B the input gradient): t = 3, f = 1, w = 1, over p = 8.
        let (t, f, w) = (3.0, 1.0, 1.0);
        assert_eq!(bubble(Schedule::OneFOneB, 8, t, f, w), 21.0); // (p − 1)(F + B + W)
        assert_eq!(bubble(Schedule::Interleaved(3), 8, t, f, w), 7.0);
        // ZB-V: zero bubble when the three passes take as long (Qi et al. 2024, §6).
        assert_eq!(bubble(Schedule::ZeroBubbleV, 8, t, f, w), 0.0);
        // DualPipeV over PP = 16 chunks of half a GPU: (PP/2 − 1)(F&B + B − 3W) with F = ½,
        // B (full backward) = 1, W = ½, F&B = 1½: 7 × (1.5 + 1 − 1.5) = 7.
        assert_eq!(bubble(Schedule::DualPipeV, 8, t, f, w), 7.0);
        // ZB-H2's (p − 1)(F + B − 2W) over two chunks: F = 1, B = 2, W = 1 gives 7 × 1 / 2.
        assert_eq!(bubble(Schedule::ZeroBubbleV, 8, 4.0, 1.0, 1.0), 3.5);
        // No stage, no bubble.
        assert_eq!(bubble(Schedule::DualPipeV, 1, t, f, w), 0.0);
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
    fn a_lower_precision_optimizer_state_moves_fewer_bytes() {
        // 28 bytes a parameter with FP32 master and moments; BF16 moments save 4 bytes, each
        // read and written: 20; remainders 2 more: 16 (BF16 weights: no FP8 casts).
        let with = |states, master| {
            let d = Detailed {
                options: Options {
                    optimizer_states: states,
                    master_weights: master,
                    ..Options::for_stack(Stack::MegatronTe)
                },
                ..detailed(Recompute::Full, Schedule::OneFOneB)
            };
            time("70b", 8, 1, 1, d, &flat(0.5)).breakdown.optimizer
        };
        use crate::cost::step::recipe::{MasterWeights, OptimizerStates};
        let fp32 = with(OptimizerStates::Fp32, MasterWeights::Fp32);
        let bf16 = with(OptimizerStates::Bf16, MasterWeights::Fp32);
        let remainders = with(OptimizerStates::Bf16, MasterWeights::Remainders);
        assert!((bf16 / fp32 - 20.0 / 28.0).abs() < 1e-12);
        assert!((remainders / fp32 - 16.0 / 28.0).abs() < 1e-12);
    }

    #[test]
    fn fp8_weights_gather_one_byte_a_matrix_parameter() {
        // ZeRO 1 at TP 8, PP 1: the weights' all-gather moves 2Ψ bytes, less one byte for each
        // of the 80 layers' matrix parameters on the rank with --fp8-params.
        let s = preset("70b").unwrap();
        let b = Brief::default();
        let l = Layout::new(&b, &s, 8, 1, ZeroStage::new(1).unwrap()).unwrap();
        let machine = b.machine();
        let mut opts = flat(0.5);
        opts.dp_overlap = 0.0;
        let fp8 = |fp8_params| Detailed {
            step: Step {
                precision: crate::cost::step::precision::Precision::Fp8,
                ..detailed(Recompute::Full, Schedule::OneFOneB).step
            },
            options: Options {
                fp8_params,
                ..Options::for_stack(Stack::MegatronTe)
            },
        };
        let dp = |d: Detailed| {
            step_time(&machine, &s, &l, &d, &opts)
                .unwrap()
                .breakdown
                .dp_comm
        };
        let psi = stage_params(&s, 8, 80, true, true);
        let matrices = 80.0 * s.layer_matrix_params() as f64 / 8.0;
        let link = link_for(&machine, 8, l.shard_group());
        let n = l.shard_group();
        let want =
            reduce_scatter(link, n, 2.0 * psi) - reduce_scatter(link, n, 2.0 * psi - matrices);
        let got = dp(fp8(false)) - dp(fp8(true));
        assert!((got - want).abs() < 1e-12 * want, "{got} {want}");
        assert!(want > 0.0);
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
                gradients: crate::cost::step::stack::GradientPrecision::Bf16,
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
