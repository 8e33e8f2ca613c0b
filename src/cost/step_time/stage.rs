//! The slowest stage of a step, per micro-batch: its compute, its exposed TP, CP and
//! expert-parallel traffic and its pipeline send, with its parameters and the step's FLOPs —
//! the part of a step's time that does not depend on how the data-parallel group shards the
//! state ([`Unsharded`]).

use crate::cost::chip::flops::layer_flops;
use crate::cost::chip::flops::layer_flops_with;
use crate::cost::chip::flops::model_flops_per_token;
use crate::cost::chip::operations::StageCompute;
use crate::cost::links::exchanges::cp_exchange;
use crate::cost::links::exchanges::moe_layer_comm;
use crate::cost::links::hidden;
use crate::cost::links::link_for;
use crate::cost::links::topology::send;
use crate::cost::links::topology::Link;
use crate::cost::links::topology::{all_reduce, reduce_scatter};
use crate::cost::step::detailed::Detailed;
use crate::cost::step::experts::dispatcher_allowed;
use crate::cost::step::graphs::exposed;
use crate::cost::step::pipeline::mtp_on_stage;
use crate::cost::step::pipeline::shape_stages;
use crate::cost::step::pipeline::stage_expert_params;
use crate::cost::step::pipeline::stage_params_with;
use crate::cost::step::pipeline::StageKinds;
use crate::cost::step::pipeline::{blocks_of_run, hybrid_stage_matrices, hybrid_stage_params};
use crate::cost::step::stack::Stack;
use crate::cost::step::MoeRecompute;
use crate::cost::step::Recompute;
use crate::cost::step_time::micro_batch::MicroBatch;
use crate::cost::step_time::options::overlaps;
use crate::cost::step_time::options::TimeOptions;
use crate::cost::Machine;
use crate::error::Result;
use crate::model::layout::Layout;
use crate::model::moe_dense_part;
use crate::model::without_shared;
use crate::model::Shape;
use crate::units::FLOPS_PER_TFLOPS;
/// The part of [`crate::cost::step_time::Unscheduled`] that does not depend on how the data-parallel group shards the
/// state (the layout's ZeRO stage and hybrid-sharding replicas): the slowest stage's compute
/// and its TP, CP and pipeline traffic per micro-batch, its parameters and the FLOPs. A search
/// works it out once for the layouts of the same degrees and finishes it for each
/// ([`crate::cost::step_time::unscheduled_of`]), as [`crate::cost::step_time::unscheduled`] does.
#[derive(Debug, Clone, PartialEq)]
pub struct Unsharded {
    pub(super) kinds: StageKinds,
    pub(super) m: u64,
    pub(super) compute: f64,
    pub(super) forward: f64,
    pub(super) tp_comm: f64,
    pub(super) cp_comm: f64,
    pub(super) pp_send: f64,
    /// The slowest stage's layers, and its parameters on this GPU's TP shard (the routed
    /// experts' apart, in `experts`).
    pub(super) stage_layers: u64,
    pub(super) psi: f64,
    pub(super) experts: f64,
    /// The slowest stage's exposed expert-parallel traffic per micro-batch (all-to-alls and
    /// the expert-TP gathers), seconds; 0 for a dense model.
    pub(super) ep_comm: f64,
    /// The slowest stage's MoE layers' host-bound time per micro-batch past their GPU time
    /// (launches no CUDA graph captures, [`crate::cost::step::graphs`]), seconds; 0 for a
    /// dense model and off the megatron-te stack.
    pub(super) host: f64,
    /// The FP8 casts of the slowest stage's matrices, bytes a step (0 in BF16).
    pub(super) fp8_casts: f64,
    /// The stage's layer-matrix parameters on this GPU when they are kept in FP8
    /// (`--fp8-params`), which the weights' all-gather moves in FP8; 0 otherwise.
    pub(super) fp8_matrices: f64,
    /// The slowest stage's waits for its offloaded activations' copies per micro-batch
    /// (`--offload-activations`, [`crate::cost::step::offload::exposed`]), seconds; 0 for none.
    pub(super) offload: f64,
    /// The share of a forward's time its weight-gradient pass W takes again (the V schedules
    /// run it apart, [`crate::cost::step::Schedule::is_v`]): the matrices' share of the
    /// model FLOPs, `6·P_matrices / (6·P_matrices + attention)`. W computes `∇W = ∇z·xᵀ`, a
    /// projection's forward FLOPs again, and attention's core has no weights (Qi et al. 2024,
    /// Table 1: F = `sbh(24h + 4s)`, W = `sbh·24h`).
    pub(super) weight_share: f64,
    pub(super) flops: (f64, f64, f64),
    /// The slowest stage's layers' matrices on this GPU, the routed experts' apart: what Muon
    /// steps with one moment ([`crate::cost::step::muon`]).
    pub(super) matrices: f64,
    /// Muon's Newton–Schulz iterations on the stage's matrices on this GPU, before the data-
    /// parallel ranks share them, and on the largest one (what a rank steps at least): for its
    /// layers' dense matrices and router, and for its routed experts, seconds a step; 0 under
    /// AdamW.
    pub(super) newton_schulz: [(f64, f64); 2],
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
    d.shape_allowed(shape, layout)?;
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
        moe_before,
        bf16_layer,
        blocks,
    } = *micro_batch;
    // An MoE layer's host floor past its routed part's GPU time (the megatron-te stack's, the
    // one its parameter was fitted on; [`crate::cost::step::graphs`]).
    // The experts on this rank, `E/EP` ([`crate::cost::step::experts::Routed`]).
    let local_experts = moe.map_or(0.0, |(_, r)| r.local_experts);
    let host_floor = |routed: f64| {
        if d.options.stack == Stack::MegatronTe {
            exposed(
                opts.calibration.host_expert,
                d.options.cuda_graphs,
                local_experts,
                routed,
            )
        } else {
            0.0
        }
    };
    if moe.is_some() {
        dispatcher_allowed(&machine.cluster, layout, d.options.ep_dispatcher)?;
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

    // TP collectives per layer per micro-batch, each an all-reduce's worth of one activation:
    // with sequence parallelism a reduce-scatter of the BF16 output and an all-gather of an
    // input, which below BF16 Transformer Engine (the megatron-te stack; the others are taken
    // to gather BF16) gathers quantized, the projections' operand
    // bytes (the QKV and FC1 inputs forward, the output gradients into the row-parallel
    // projections' backward; its userbuffers hold them in FP8, [`crate::cost::memory`]);
    // without it two BF16 all-reduces, forward and backward. A recomputed forward repeats its
    // two (torchtitan's op-level policy keeps the reduce-scatters' outputs).
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
    // The bytes an element the all-gathers move where they gather quantized.
    let quantized =
        (step.sequence_parallel && precision.is_narrow() && d.options.stack == Stack::MegatronTe)
            .then(|| {
                d.recipe()
                    .map_or(precision.operand_bytes(), |r| r.operand_bytes())
            });
    let link = machine.topology.intra();
    let tp_one = match quantized {
        Some(gathered) => {
            reduce_scatter(link, tp, 2.0 * tokens * h)
                + reduce_scatter(link, tp, gathered * tokens * h)
        }
        None => all_reduce(link, tp, 2.0 * tokens * h),
    };
    let tp_layer = match shape.attention_widths().latent {
        None => tp_calls * tp_one,
        Some(l) => {
            let gathered = step.sequence_parallel.then(|| quantized.unwrap_or(2.0));
            tp_calls * tp_one - latent_gathers(link, tp, tokens, (h, l.down()), tp_calls, gathered)
        }
    };
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
    let stage_list = if moe.is_some() || blocks.is_some() {
        shape_stages(shape, pp, d.options.stages)?
    } else {
        Vec::new()
    };

    // The slowest stage: (index, compute, forward compute, tp and cp, ep, moe, host) per
    // micro-batch.
    let (slowest, stage_layers, compute, forward, tp_comm, cp_comm, ep_comm, stage_moe, host) =
        kinds
            .kinds()
            .iter()
            .map(|k| {
                let (i, l) = (k.index, k.layers);
                let last = i == pp - 1;
                let (head_all, head_fwd) = if last { head } else { (0.0, 0.0) };
                // The last stage runs its multi-token-prediction layers after its own, each a
                // layer of its kind (the depths' heads and projections are in `head`).
                let (mtp, mtp_moe) = mtp_on_stage(shape, i, pp);
                // A hybrid stage sums its blocks by kind. Each block but an MoE one has one
                // column- and one row-parallel projection, half a layer's TP collectives, hidden
                // behind its own GEMMs; an MoE block an MoE layer's exposed ones less an
                // attention block's; attention blocks alone exchange K and V over CP.
                if let Some(b) = blocks {
                    let c = blocks_of_run(shape, &stage_list, i);
                    let n = [c.mamba, c.attention, c.mlp, c.moe].map(|n| n as f64);
                    let sum = |part: fn(&StageCompute) -> f64| {
                        n.iter().zip(&b).map(|(n, b)| n * part(b)).sum::<f64>()
                    };
                    let (tp_moe, ep_moe) = moe_layer.map_or((0.0, 0.0), |(_, tp, ep)| (tp, ep));
                    // Half a layer's collectives, hidden behind the block's own GEMMs.
                    let half = tp_layer / 2.0;
                    let tp_block = |b: &StageCompute| half - hidden(half, overlap, b.2);
                    let tp_attention = tp_block(&b[1]);
                    // Each MoE block's host floor, after its routed part: the block less its
                    // shared experts and norms (the MoE layer's dense part less its attention,
                    // which here is a block of its own).
                    let routed = (b[3].0 - (moe_before - b[1].0).max(0.0)).max(0.0);
                    let host = n[3] * host_floor(routed + ep_moe);
                    return (
                        i,
                        l,
                        sum(|b| b.0) + head_all,
                        sum(|b| b.1) + head_fwd,
                        n[0] * tp_block(&b[0])
                            + n[1] * tp_attention
                            + n[2] * tp_block(&b[2])
                            + n[3] * (tp_moe - tp_attention).max(0.0),
                        n[1] * cp_per_layer,
                        n[3] * ep_moe,
                        c.moe,
                        host,
                    );
                }
                match moe_layer {
                    Some(((all_moe, fwd_moe, _), tp_moe, ep_moe)) => {
                        let n_moe =
                            crate::cost::step::pipeline::moe_layers_of_run(shape, &stage_list, i)
                                + mtp_moe;
                        let l = l + mtp;
                        let (dense, m) = ((l - n_moe) as f64, n_moe as f64);
                        let host = m * host_floor(all_moe - moe_before + ep_moe);
                        (
                            i,
                            l,
                            dense * layer.0 + m * all_moe + head_all,
                            dense * layer.1 + m * fwd_moe + head_fwd,
                            dense * tp_per_layer + m * tp_moe,
                            l as f64 * cp_per_layer,
                            m * ep_moe,
                            n_moe,
                            host,
                        )
                    }
                    None => {
                        // The stage's layers kept in BF16 (`--fp8-bf16-layers`) at their own time.
                        let bf16 = d.options.bf16_layers.on_stage(i, pp, l);
                        let l = l + mtp;
                        let layers = l;
                        let l = l as f64;
                        let (mut all, mut fwd) = (l * layer.0, l * layer.1);
                        if let (Some(b), true) = (bf16_layer, bf16 > 0) {
                            let (n, fp8) = (bf16 as f64, l - bf16 as f64);
                            (all, fwd) = (fp8 * layer.0 + n * b.0, fp8 * layer.1 + n * b.1);
                        }
                        let all = all + if last { head.0 } else { 0.0 };
                        let fwd = fwd + if last { head.1 } else { 0.0 };
                        (
                            i,
                            layers,
                            all,
                            fwd,
                            l * tp_per_layer,
                            l * cp_per_layer,
                            0.0,
                            0,
                            0.0,
                        )
                    }
                }
            })
            .max_by(|a, b| {
                (a.2 + a.4 + a.5 + a.6 + a.8)
                    .total_cmp(&(b.2 + b.4 + b.5 + b.6 + b.8))
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
    let stage_blocks = blocks.map(|_| blocks_of_run(shape, &stage_list, slowest));
    let psi = match stage_blocks {
        Some(c) => hybrid_stage_params(shape, tp, c, first, last),
        None => stage_params_with(shape, tp, stage_layers, stage_moe, first, last),
    };
    let experts = stage_expert_params(shape, layout, stage_moe);
    // With FP8, the stage's layer matrices cast to FP8 and transposed once a step: read 2,
    // write 2 bytes a parameter (FP8: the recipe's, [`crate::cost::step::recipe`]; FP4: the
    // format's copy, [`Precision::weight_copy_bytes`]); with FP8
    // weights (`--fp8-params`) the optimizer writes them from the FP32 master it reads
    // anyway, and the transpose reads the FP8 weight.
    let recipe = d.recipe();
    // The slowest stage's layers below BF16: all but those kept in BF16, which are the
    // decoder's (not the multi-token-prediction layers), as the memory counts them.
    let (depths, moe_depths) = mtp_on_stage(shape, slowest, pp);
    let (decoder, decoder_moe) = (stage_layers - depths, stage_moe - moe_depths);
    let fp8_layers = stage_layers - d.options.bf16_layers.on_stage(slowest, pp, decoder);
    // Of the stage's MoE layers, those below BF16.
    let moe_fp8 = stage_moe
        - crate::cost::step::pipeline::moe_bf16_layers(
            shape,
            d.options.bf16_layers,
            (slowest, pp),
            decoder,
            decoder_moe,
        );
    let fp8_casts = if precision.is_narrow() {
        let (reads, copy) = recipe.map_or((2.0, precision.weight_copy_bytes()), |r| {
            let reads = if d.options.fp8_params {
                r.fp8_weight_cast_reads(d.options.fp8_any_layout)
            } else {
                r.weight_cast_reads()
            };
            (reads, r.weight_copy_bytes(d.options.fp8_any_layout))
        });
        // A dense stage's count in the order it has always been summed (the same to the bit).
        if let Some(c) = stage_blocks {
            (reads + copy) * (hybrid_stage_matrices(shape, tp, c) + experts)
        } else if stage_moe == 0 {
            (reads + copy) * fp8_layers as f64 * shape.layer_matrix_params() as f64 / tp as f64
        } else {
            (reads + copy) * narrow_matrices(shape, tp, fp8_layers, moe_fp8, stage_moe, experts)
        }
    } else {
        0.0
    };
    // With FP8 weights, the stage's layer matrices on this GPU, which ZeRO gathers in FP8 (the
    // routed experts', gathered over their own group, counted in BF16: an upper bound).
    let fp8_matrices = if d.options.fp8_params && recipe.is_some() {
        match stage_blocks {
            Some(c) => hybrid_stage_matrices(shape, tp, c),
            None => narrow_matrices(shape, tp, fp8_layers, moe_fp8, stage_moe, 0.0),
        }
    } else {
        0.0
    };
    // Offloaded activations (PP 1: the stage is the model): each offloaded layer's saved bytes
    // to the host after its forward and back before its backward, behind the stage's mean
    // layer's forward and backward (the head's left out).
    let offloaded = u64::from(d.options.offload_activations);
    let offload = if offloaded > 0 {
        let bytes = d
            .stage_shares_in(shape, layout, kinds)?
            .offloaded_layer_bytes(slowest);
        let (head_all, head_fwd) = if last { head } else { (0.0, 0.0) };
        let l = stage_layers.max(1) as f64;
        let per_layer = (
            (forward - head_fwd) / l,
            (compute - forward - (head_all - head_fwd)) / l,
        );
        let link = machine.topology.host_link_gbps * 1e9;
        crate::cost::step::offload::exposed(stage_layers, offloaded, bytes, link, per_layer)
    } else {
        0.0
    };
    // The stage's hidden matrices on this GPU, and Muon's Newton–Schulz iterations on them at
    // the chip's BF16 GEMM ceiling (square-ish products thousands wide).
    let muon = d.options.optimizer == crate::cost::step::recipe::Optimizer::Muon;
    let matrices = if muon {
        crate::cost::step::pipeline::stage_hidden_matrices(
            shape,
            tp,
            stage_layers,
            stage_moe,
            stage_blocks,
        )
    } else {
        // AdamW steps every matrix alike: none apart.
        0.0
    };
    let newton_schulz = if muon {
        use crate::cost::step::muon;
        let chip = crate::cost::chip::chip_for(machine, d.options.stack)?;
        let rate = peak * chip.gemm_ceiling() * opts.calibration.sustained_for(d.options.stack);
        let steps = muon::NS_STEPS;
        let dense_layers = (stage_layers - stage_moe) as f64;
        let shared = shape.experts.as_ref().map_or(0, |e| e.shared_ffn);
        let dense = dense_layers * muon::layer_flops(shape, tp, shape.ffn, steps)
            + stage_moe as f64
                * (muon::layer_flops(shape, tp, shared, steps) + muon::router_flops(shape, steps));
        let largest = muon::largest_flops(shape, tp, shape.ffn, steps)
            .max(muon::largest_flops(shape, tp, shared, steps));
        let (experts, expert) = muon::experts_flops(shape, local_experts, layout.etp, steps);
        [
            (dense / rate, largest / rate),
            (stage_moe as f64 * experts / rate, expert / rate),
        ]
    } else {
        [(0.0, 0.0); 2]
    };
    let cluster_peak = machine.cluster.gpus as f64 * peak;
    let (full_layer, _) = layer_flops(shape, 1, step.seq_len, step.recompute);
    let moe_layers = shape.moe_layers();
    // The multi-token-prediction layers count as layers of their kind.
    let mtp = u64::from(shape.mtp);
    let mtp_moe = if shape.mtp_is_moe() { mtp } else { 0 };
    let (layers, moe_layers) = (u64::from(shape.layers) + mtp, moe_layers + mtp_moe);
    let hardware_layers = if let Some(hybrid) = &shape.hybrid {
        hybrid_hardware_flops(
            shape,
            hybrid,
            step.seq_len,
            step.recompute,
            d.options.moe_recompute,
        )
    } else if moe_layers == 0 {
        layers as f64 * full_layer
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
        (layers - moe_layers) as f64 * full_layer + moe_layers as f64 * full_moe
    };
    // `mla_up_proj` runs every layer's up-projections again: `2·(r_q·a·d_qk + r_kv·a·(d_nope
    // + d_v))` FLOPs a token (`h` for `r_q` where the queries have no latent).
    let w = shape.attention_widths();
    let hardware_layers = match (d.options.latent_recompute, w.latent) {
        (true, Some(l)) => {
            let up = 2.0 * (l.q_rank.unwrap_or(h) * w.query + l.kv_rank * l.kv_up);
            hardware_layers + layers as f64 * up
        }
        _ => hardware_layers,
    };
    // The head, and each multi-token-prediction depth's head and `2h → h` projection.
    let depths = f64::from(shape.mtp);
    let hardware_per_token =
        hardware_layers + 3.0 * 2.0 * v * h * (1.0 + depths) + 3.0 * 2.0 * 2.0 * h * h * depths;
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
        host,
        fp8_casts,
        fp8_matrices,
        offload,
        weight_share: 6.0 * (shape.matrix_params() + shape.mtp_matrix_params()) as f64
            / model_flops_per_token(shape, step.seq_len),
        flops: (
            model_flops_per_token(shape, step.seq_len),
            hardware_per_token,
            cluster_peak,
        ),
        matrices,
        newton_schulz,
    })
}

/// What latent attention's TP collectives save over [`Unscheduled`]'s `h`-wide count
/// (Megatron-core's `MLASelfAttention`): with sequence parallelism (`gathered`: the bytes an
/// element its all-gathers move) the attention's input all-gather forward and its
/// reduce-scatter backward (BF16) move the latents and the shared RoPE key, `latent = r_q +
/// r_kv + d_rope` a token, not `h`: a gather each forward pass (the recomputed ones too,
/// `tp_calls/2 − 1` of them) and one reduce-scatter a backward. Without it, the
/// down-projections run whole on every rank, and the one all-reduce of the attention's input
/// gradient a backward moves the latents' gradients instead.
fn latent_gathers(
    link: Link,
    tp: u64,
    tokens: f64,
    (h, latent): (f64, f64),
    tp_calls: f64,
    gathered: Option<f64>,
) -> f64 {
    match gathered {
        Some(gathered) => {
            let one = |bytes: f64| {
                reduce_scatter(link, tp, bytes * tokens * h)
                    - reduce_scatter(link, tp, bytes * tokens * latent)
            };
            (tp_calls / 2.0 - 1.0) * one(gathered) + one(2.0)
        }
        None => {
            all_reduce(link, tp, 2.0 * tokens * h) - all_reduce(link, tp, 2.0 * tokens * latent)
        }
    }
}

/// The matrix parameters on one GPU of a stage's `fp8_layers` layers below BF16, of which
/// `moe_fp8` are mixtures of experts (of the stage's `moe`): a dense layer's matrices over TP,
/// an MoE layer's dense part's (attention, the shared experts) over TP, and the routed
/// experts' share of the `experts` parameters of the stage's MoE layers on this GPU, all of
/// them in low precision under an FP8 recipe (Transformer Engine's grouped GEMMs cast and
/// cache them as its linear layers do).
fn narrow_matrices(
    shape: &Shape,
    tp: u64,
    fp8_layers: u64,
    moe_fp8: u64,
    moe: u64,
    experts: f64,
) -> f64 {
    if moe == 0 {
        return fp8_layers as f64 * shape.layer_matrix_params() as f64 / tp as f64;
    }
    let dense = (fp8_layers - moe_fp8) as f64 * shape.layer_matrix_params() as f64 / tp as f64;
    let moe_part = moe_fp8 as f64
        * crate::model::moe_dense_part(shape).layer_matrix_params() as f64
        / tp as f64;
    dense + moe_part + experts * moe_fp8 as f64 / moe as f64
}

/// A hybrid model's blocks' hardware FLOPs a token ([`crate::model::hybrid`]): the model
/// FLOPs of its blocks ([`model_flops_per_token`] less the head's `6·V·h`), and what
/// recomputation runs again: `full` every block's forward (a third of their model FLOPs),
/// `selective-layer` half that,
/// `selective` the attention blocks' cores' forward, `moe` the MoE blocks' MLP forward (2
/// FLOPs a matrix parameter a token: the router, the shared and `k` routed experts).
fn hybrid_hardware_flops(
    shape: &Shape,
    hybrid: &crate::model::Hybrid,
    seq_len: u64,
    recompute: Recompute,
    moe: MoeRecompute,
) -> f64 {
    let (h, v) = (shape.hidden as f64, shape.vocab as f64);
    let blocks = model_flops_per_token(shape, seq_len) - 6.0 * v * h;
    let c = hybrid.counts();
    let core = || {
        let (_, attention) = crate::cost::chip::flops::layer_forward_flops(shape, 1, seq_len);
        c.attention as f64 * attention
    };
    let again = match recompute {
        Recompute::Full => blocks / 3.0,
        Recompute::SelectiveLayer => blocks / 6.0,
        Recompute::Selective => core(),
        _ => 0.0,
    };
    let moe_again = match (recompute, moe) {
        (Recompute::Full | Recompute::SelectiveLayer, _) => 0.0,
        (_, MoeRecompute::Layer) => {
            let matrices = shape.experts.as_ref().map_or(0.0, |e| {
                let up = shape.mlp_inputs() + 1;
                (e.routed as f64 * h
                    + (up * shape.hidden) as f64
                        * (e.shared_ffn + u64::from(e.per_token) * e.ffn) as f64)
                    * c.moe as f64
            });
            2.0 * matrices
        }
        _ => 0.0,
    };
    blocks + again + moe_again
}
