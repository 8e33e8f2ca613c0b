//! Per-GPU memory of a real training step, stage by stage.
//!
//! For each pipeline stage `i` of `p`, with `Ψᵢ` the parameters one GPU of the stage holds:
//!
//! | component | bytes | source |
//! |---|---|---|
//! | weights | `2·Ψᵢ`, ÷DP from ZeRO 3; under FP8 each layer's matrices' FP8 copy and, but for a per-tensor recipe on Blackwell, its transpose beside them (the recipe's bytes), and with `--fp8-params` that copy instead of their BF16 bytes (sharded: the recipe's stored bytes) | BF16; [`crate::cost::step::recipe`] |
//! | gradients | `2·Ψᵢ` (BF16) or `4·Ψᵢ` (FP32 buffers), ÷DP from ZeRO 2 | Megatron-LM and DeepSpeed keep FP32 buffers: 18 bytes per parameter in all |
//! | optimizer | `12·Ψᵢ` (or the precision-aware optimizer's master and moments, 6 to 12), ÷DP from ZeRO 1 | FP32 master weights, Adam m and v (Rajbhandari et al. 2020); [`crate::cost::step::recipe::optimizer_bytes`] |
//! | activations | per layer ([`crate::cost::memory::activations`]) × layers of the stage × micro-batches in flight ([`crate::cost::step::Step::in_flight`]) | Korthikanti et al. 2022; Narayanan et al. 2021 |
//! | logits (last stage) | `c·s·b·V / TP + 4·s·b·h`, `c` = 4 bytes (FP32 loss) or 2 (BF16); the `4·s·b·h` (÷TP with sequence parallelism) are the final norm's and the head's inputs; each multi-token-prediction depth keeps them again and `4·s·b·h` of its own (its norms' and projection's inputs) | vocabulary-parallel cross-entropy keeps the log-probabilities for backward |
//! | transient | the larger of one layer's backward working set (recomputed activations and activation gradients, [`crate::cost::memory::activations`]) and, on the last stage, the loss's forward peak above what it keeps: `6·s·b·V/TP` (BF16 logits, their FP32 copy, FP32 softmax: 10 bytes a value at the peak) or `2·s·b·V/TP` with a BF16 loss | calibration: 4.47 GB kept, 10.91 GB at the forward peak for V = 128,256, s = 8,192 |
//! | ZeRO 3 buffers | with sharded weights, two units (the next one prefetched) of BF16 weights and one unit's gradients whole, the unit a layer or the output head | FSDP2 and DeepSpeed ZeRO 3 prefetch one unit |
//! | reserve | a fixed reserve plus a fraction of everything else | see [`crate::cost::step::detailed::Options::reserve_gb`] |
//! | userbuffers | with TP-communication overlap, `(s·b/CP)·h` elements in each of Transformer Engine's 12 communication buffers: 24 bytes an element in BF16, 16 in FP8 | [`userbuffers`] |
//!
//! `Ψᵢ` counts exactly what the stage holds: its layers' matrices split over TP and their two
//! RMSNorm vectors whole; the input embedding on the first stage and the output head on the
//! last, both split over TP by vocabulary (Megatron-LM's vocabulary-parallel embedding), and the
//! final norm on the last. The stage that needs the most is the one that must fit; the plan
//! names it.
//!
//! Layers are spread evenly, the remainder on the last stages (which hold the fewest
//! micro-batches), or as Llama 3 did (Llama Team 2024, §3.3.2): one layer fewer on the first
//! and the last stage, which carry the embedding and the output head.

use super::breakdown::{Detail, Memory, StageInfo, StageRole};
use super::plate::shard;
use crate::cost::memory::activations::{Layer, Setting};
use crate::cost::step::experts::Routed;
use crate::cost::step::offload;
use crate::cost::step::optimizer_offload as offload_optimizer;
use crate::cost::step::pipeline::{mtp_on_stage, StageKinds, MAX_STAGE_KINDS};
use crate::error::Result;
use crate::model::layout::Layout;
use crate::model::moe_dense_part;
use crate::model::Shape;
use crate::units::BYTES_PER_GB;

use crate::cost::memory::buffers::cp_buffers;
use crate::cost::memory::buffers::userbuffers;
use crate::cost::step::detailed::Detailed;
use crate::cost::step::pipeline::shape_stages;
use crate::cost::step::pipeline::stage_expert_params;
use crate::cost::step::pipeline::stage_params;
use crate::cost::step::pipeline::stage_params_with;
use crate::cost::step::pipeline::{blocks_of_run, hybrid_stage_matrices, hybrid_stage_params};
pub use crate::cost::step::stack::{GradientPrecision, LossPrecision, StageSplit};
use crate::model::hybrid::Block;

impl Detailed {
    /// Memory of the stage that needs the most, or why the step does not go with the layout.
    pub fn memory(&self, shape: &Shape, layout: &Layout) -> Result<Memory> {
        self.schedule_allowed()?;
        self.hybrid_schedule_allowed(shape)?;
        let stages = self.stages(shape, layout)?;
        self.memory_of(&stages, layout)
    }

    /// What each stage that can need the most holds before the schedule is known: everything
    /// but its stored activations, which [`Detailed::memory_of`] adds for the step's schedule.
    /// The same for every schedule of a step, so a search works it out once for them all.
    pub fn stages(&self, shape: &Shape, layout: &Layout) -> Result<Stages> {
        self.stages_in(shape, layout, &self.kinds(shape, layout)?)
    }

    /// [`Detailed::stages`] in the pipeline `kinds` ([`Detailed::kinds`] of the layout): one
    /// representative of each kind of stage is weighed.
    pub fn stages_in(&self, shape: &Shape, layout: &Layout, kinds: &StageKinds) -> Result<Stages> {
        let mut stages = [None; MAX_STAGE_KINDS];
        let m = self.stage_bases_in(shape, layout, kinds, |k, base| stages[k] = Some(base))?;
        Ok(Stages {
            kinds: *kinds,
            m,
            stages,
            hidden: shape.hidden,
        })
    }

    /// What a search weighs of [`Detailed::stages_in`]'s stages, without their whole memory.
    pub fn stage_peaks_in(
        &self,
        shape: &Shape,
        layout: &Layout,
        kinds: &StageKinds,
    ) -> Result<StagePeaks> {
        Ok(self.stage_peaks_of(&self.stage_shares_in(shape, layout, kinds)?, layout))
    }

    /// [`Detailed::stage_peaks_in`] from the stages' [`StageShares`] (worked out for a layout
    /// of the same degrees, whatever its ZeRO stage and replicas).
    #[inline]
    pub fn stage_peaks_of(&self, shares: &StageShares, layout: &Layout) -> StagePeaks {
        let mut stages = [StagePeak::default(); MAX_STAGE_KINDS];
        for (peak, share) in stages.iter_mut().zip(&shares.stages[..shares.len]) {
            *peak = self.stage_base(shares, share, layout).peak();
        }
        StagePeaks {
            kinds: shares.kinds,
            m: shares.m,
            stages,
            len: shares.len,
            hidden: shares.hidden,
        }
    }

    /// Each kind's representative's [`StageBase`] to `each` (with the kind's place), and the
    /// step's micro-batches; or why the step does not go with the layout.
    fn stage_bases_in(
        &self,
        shape: &Shape,
        layout: &Layout,
        kinds: &StageKinds,
        mut each: impl FnMut(usize, StageBase),
    ) -> Result<u64> {
        let shares = self.stage_shares_in(shape, layout, kinds)?;
        for (k, share) in shares.stages[..shares.len].iter().enumerate() {
            each(k, self.stage_base(&shares, share, layout));
        }
        Ok(shares.m)
    }

    /// What each kind's representative holds whatever the layout's ZeRO stage and
    /// hybrid-sharding replicas ([`StageShares`]); or why the step does not go with the layout.
    pub fn stage_shares_in(
        &self,
        shape: &Shape,
        layout: &Layout,
        kinds: &StageKinds,
    ) -> Result<StageShares> {
        let (step, opts) = (&self.step, &self.options);
        // The shape's attention, experts and BF16 layers with the layout (a window under a
        // ring's CP, an MoE under TP without sequence parallelism are refused): the search
        // weighs steps here without [`Detailed::kinds`]' checks.
        self.shape_allowed(shape, layout)?;
        let m = self.unscheduled_pipeline_in(layout, kinds)?;
        // Each CP rank holds `s/CP` of every sequence (the step's rule: 2·CP chunks divide it).
        let local_seq = step.seq_len / layout.cp.max(1);
        let precision = step.precision;
        let setting = Setting {
            layer: Layer::Llama(opts.kernels),
            seq_len: local_seq,
            micro_batch: step.micro_batch,
            tp: layout.tp,
            sequence_parallel: step.sequence_parallel,
            fp8: precision.is_narrow(),
            latent_recompute: opts.latent_recompute,
            probs_in_activation: opts.stack.settings().probs_in_activation,
        };
        // Megatron-core's `layernorm` module recomputes an MoE layer's pre-MLP norm
        // ([`Setting::norm_output`]; the modules go with none or selective recomputation
        // alone, `experts_allowed`).
        let norms = if opts.norm_recompute {
            setting.norm_output(shape)
        } else {
            0.0
        };
        let per_layer = setting.stored(shape, step.recompute);
        // A layer kept in BF16 under FP8 (`--fp8-bf16-layers`) keeps what BF16 does.
        let bf16_layers = if precision.is_fp8() {
            opts.bf16_layers
        } else {
            Default::default()
        };
        let per_bf16_layer = Setting {
            fp8: false,
            ..setting
        }
        .stored(shape, step.recompute);
        let routed = Routed::of(
            shape,
            layout,
            (local_seq * step.micro_batch) as f64,
            opts.moe_imbalance,
        );
        let per_moe_layer = routed.map_or(0.0, |r| {
            setting.stored_moe(shape, &r, step.recompute, opts.moe_recompute) - norms
        });
        let moe_working = routed.map_or(0.0, |r| {
            setting.working_set_moe(shape, &r, step.recompute, opts.moe_recompute)
        });
        // A hybrid model's blocks keep by kind ([`Setting::stored_block`]): Mamba-2,
        // attention, MLP, mixture of experts.
        let per_block = shape.hybrid.as_ref().map(|_| {
            // `--norm-recompute` frees an MoE block's pre-MLP norm output as an MoE
            // layer's.
            [Block::Mamba, Block::Attention, Block::Mlp, Block::Moe].map(|b| {
                setting.stored_block(
                    shape,
                    b,
                    routed.as_ref(),
                    step.recompute,
                    opts.moe_recompute,
                ) - if b == Block::Moe && routed.is_some() {
                    norms
                } else {
                    0.0
                }
            })
        });
        // Each stage's MoE layers (the most of its run), from the stages' layers; none dense.
        let stage_list = if routed.is_some() || per_block.is_some() {
            shape_stages(shape, layout.pp, opts.stages)?
        } else {
            Vec::new()
        };
        let (v, tp) = (shape.vocab as f64, layout.tp as f64);
        let tokens = (local_seq * step.micro_batch) as f64;
        let working = if shape.hybrid.is_some() {
            setting.working_set_blocks(shape, routed.as_ref(), step.recompute, opts.moe_recompute)
        } else {
            setting.working_set(shape, step.recompute).max(moe_working)
        } + cp_buffers(shape, layout, tokens, opts.stack.settings().cp);
        // The last stage's head keeps its input and the final RMSNorm's input, 2·s·b·h each.
        let head_inputs = 2.0 * setting.layer_input(shape);
        // FP8 copies and transposes of the layers' matrices (Transformer Engine keeps them
        // across micro-batches), on this GPU's TP shard.
        // One layer's matrices on this GPU's TP shard, and their low-precision copies: FP8's in
        // the recipe's bytes ([`crate::cost::step::recipe`]), FP4's in the format's (its
        // rowwise and columnwise copies with their scales, [`Precision::weight_copy_bytes`]),
        // which the step's time casts too.
        // A hybrid model's largest block's (what ZeRO 3 gathers two of).
        let kinds_present = shape.hybrid.as_ref().map(|h| {
            let c = h.counts();
            [
                (Block::Mamba, c.mamba),
                (Block::Attention, c.attention),
                (Block::Mlp, c.mlp),
                (Block::Moe, c.moe),
            ]
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(b, _)| b)
            .collect::<Vec<_>>()
        });
        let matrix = match &kinds_present {
            Some(kinds) => {
                kinds
                    .iter()
                    .map(|&b| shape.block_params(b).matrices)
                    .max()
                    .unwrap_or(0) as f64
                    / tp
            }
            None => shape.layer_matrix_params() as f64 / tp,
        };
        let recipe = self.recipe();
        let any_layout = self.options.fp8_any_layout;
        let copy_bytes = recipe.map_or(precision.weight_copy_bytes(), |r| {
            r.weight_copy_bytes(any_layout)
        });
        let fp8_copy = copy_bytes * matrix;
        // An MoE layer's: its dense part's matrices (attention, the shared experts) on this
        // TP shard; its routed experts' copies go with the stage's expert parameters.
        let moe_matrix = if routed.is_some() {
            moe_dense_part(shape).layer_matrix_params() as f64 / tp
        } else {
            0.0
        };
        // With FP8 weights (`--fp8-params`) the BF16 copy of the matrices is not kept: the
        // bytes a parameter dropped from the weights unsharded (2) and sharded (2 less the FP8
        // shard's), and ZeRO 3's two gathered units' BF16 matrices.
        let fp8_weights = recipe.filter(|_| opts.fp8_params).map(|r| FpWeights {
            matrix,
            moe_matrix,
            sharded: r.stored_weight_bytes(),
        });
        // ZeRO 3's unit: the largest of the stage, a layer or on the last stage the output head.
        let layer_unit = if let Some(kinds) = &kinds_present {
            kinds
                .iter()
                .map(|&b| {
                    let one = crate::model::hybrid::BlockCounts::one(b);
                    hybrid_stage_params(shape, layout.tp, one, false, false)
                        + stage_expert_params(shape, layout, one.moe)
                })
                .fold(0.0, f64::max)
        } else if routed.is_some() {
            let moe_unit = stage_params_with(shape, layout.tp, 1, 1, false, false)
                + stage_expert_params(shape, layout, 1);
            stage_params(shape, layout.tp, 1, false, false).max(moe_unit)
        } else {
            stage_params(shape, layout.tp, 1, false, false)
        };

        // A middle stage with as many layers as the one before it holds the same weights and
        // no more micro-batches in flight (`in_flight` falls with the stage), so it never
        // needs more: only the representative of each kind is weighed, and the first stage
        // that needs the most is still the one reported.
        let mut stages = [StageShare::default(); MAX_STAGE_KINDS];
        let kinds_list = kinds.kinds();
        for (share, kind) in stages.iter_mut().zip(kinds_list) {
            let (i, n_layers) = (kind.index, kind.layers);
            let (first, last) = (i == 0, i == layout.pp - 1);
            let logits_values = if last { tokens * v / tp } else { 0.0 };
            let loss_peak = logits_values * opts.loss.peak_extra_bytes();
            let blocks = per_block.map(|b| (b, blocks_of_run(shape, &stage_list, i)));
            let decoder_moe = if let Some((_, c)) = blocks {
                c.moe
            } else if routed.is_some() {
                crate::cost::step::pipeline::moe_layers_of_run(shape, &stage_list, i)
            } else {
                0
            };
            // The last stage's multi-token-prediction layers keep what a layer of their kind
            // keeps; the BF16 layers are the decoder's.
            let bf16 = bf16_layers.on_stage(i, layout.pp, n_layers);
            let moe_bf16 = crate::cost::step::pipeline::moe_bf16_layers(
                shape,
                opts.bf16_layers,
                (i, layout.pp),
                n_layers,
                decoder_moe,
            );
            let (mtp, mtp_moe) = mtp_on_stage(shape, i, layout.pp);
            let (n_layers, moe) = (n_layers + mtp, decoder_moe + mtp_moe);
            let stored = if let Some((b, c)) = blocks {
                let n = [c.mamba, c.attention, c.mlp, c.moe];
                n.iter().zip(b).map(|(&n, b)| n as f64 * b).sum()
            } else if moe == 0 && bf16 > 0 {
                per_layer * (n_layers - bf16) as f64 + per_bf16_layer * bf16 as f64
            } else if moe == 0 {
                per_layer * n_layers as f64
            } else {
                per_layer * (n_layers - moe) as f64 + per_moe_layer * moe as f64
            };
            // Offloaded layers (`--offload-activations`, PP 1: the stage is the model) leave
            // the GPU but the `L − N` sets Transformer Engine keeps, each the stage's mean
            // layer ([`crate::cost::step::offload`]).
            let offloaded = u64::from(opts.offload_activations).min(n_layers);
            let (stored, host) = if offloaded > 0 {
                let kept = offload::kept_layers(n_layers, offloaded) as f64;
                let mean = stored / n_layers as f64;
                (mean * kept, mean * offloaded as f64)
            } else {
                (stored, 0.0)
            };
            *share = StageShare {
                index: i,
                layers: n_layers,
                moe,
                moe_bf16,
                bf16,
                stored_per_micro_batch: stored,
                offloaded,
                host_per_micro_batch: host,
                psi: match blocks {
                    Some((_, c)) => hybrid_stage_params(shape, layout.tp, c, first, last),
                    None => stage_params_with(shape, layout.tp, n_layers, moe, first, last),
                },
                matrices: blocks.map(|(_, c)| hybrid_stage_matrices(shape, layout.tp, c)),
                // Its layers' hidden matrices on this GPU (the routed experts' apart), which
                // Muon steps with one moment.
                hidden_matrices: crate::cost::step::pipeline::stage_hidden_matrices(
                    shape,
                    layout.tp,
                    n_layers,
                    moe,
                    blocks.map(|(_, c)| c),
                ),
                experts: stage_expert_params(shape, layout, moe),
                // Each multi-token-prediction depth keeps its own logits and head inputs, and
                // its two norms' inputs (the hidden state and the next token's embedding) and
                // its projection's (both, normalised): `4·s·b·h` in BF16 more.
                logits: if last {
                    (1 + mtp) as f64 * (logits_values * opts.loss.kept_bytes() + head_inputs)
                        + mtp as f64 * 2.0 * head_inputs
                } else {
                    0.0
                },
                working: working.max(loss_peak),
                unit: layer_unit.max(if last {
                    shape.embedding_params() as f64 / tp
                } else {
                    0.0
                }),
            };
        }
        Ok(StageShares {
            kinds: *kinds,
            m,
            stages,
            len: kinds_list.len(),
            fp8_copy,
            moe_copy: copy_bytes * moe_matrix,
            copy_bytes,
            fp8_weights,
            hidden: shape.hidden,
        })
    }

    /// One kind's representative's [`StageBase`] from its [`StageShare`], for the layout's ZeRO
    /// stage and shard group.
    #[inline]
    fn stage_base(&self, shares: &StageShares, share: &StageShare, layout: &Layout) -> StageBase {
        let opts = &self.options;
        let (i, n_layers, psi, fp8_copy) = (share.index, share.layers, share.psi, shares.fp8_copy);
        let zero = layout.zero;
        let shards = layout.shard_group();
        // Master weights and Adam's moments, 12 bytes a parameter unless lower
        // ([`crate::cost::step::recipe`]).
        let optimizer = opts.optimizer_bytes();
        // Muon keeps a hidden matrix's master and one moment (AdamW's bytes otherwise).
        let matrix = opts.matrix_optimizer_bytes();
        // The routed experts' state shards over the expert data-parallel group instead.
        let (experts, expert_shards) = (share.experts, layout.expert_shard_group());
        // An offloaded fraction of it lives in host memory ([`offload_optimizer`]).
        let state = shard(
            optimizer * psi - (optimizer - matrix) * share.hidden_matrices,
            zero.shards_optimizer(),
            shards,
        ) + shard(matrix * experts, zero.shards_optimizer(), expert_shards);
        let host = offload_optimizer::host_bytes(state / optimizer, opts.offload_optimizer.get());
        // ZeRO 3 gathers a unit's weights a unit ahead (two units of BF16 weights whole) and
        // reduces one unit's gradients whole: the largest unit of the stage (FSDP2's and ZeRO
        // 3's prefetch of one unit). With FP8, the two gathered layers' FP8 copies too.
        // With FP8 weights, the two gathered units' matrices come in FP8 (their copies
        // above), not BF16 too.
        let gathered = if zero.shards_weights() {
            let bf16_matrices = shares.fp8_weights.map_or(0.0, |w| 4.0 * w.matrix);
            (4.0 + opts.gradients.bytes()) * share.unit + 2.0 * fp8_copy - bf16_matrices
        } else {
            0.0
        };
        // The layers in FP8 (all but those kept in BF16), the MoE layers among them, and their
        // routed experts' parameters.
        let fp8_layers = (n_layers - share.bf16) as f64;
        let moe_fp8 = (share.moe - share.moe_bf16) as f64;
        let dense_fp8 = fp8_layers - moe_fp8;
        let experts_fp8 = if share.moe > 0 {
            experts * moe_fp8 / share.moe as f64
        } else {
            0.0
        };
        let copies = if zero.shards_weights() {
            0.0
        } else if let Some(matrices) = share.matrices {
            shares.copy_bytes * (matrices + experts_fp8)
        } else {
            dense_fp8 * fp8_copy + moe_fp8 * shares.moe_copy + shares.copy_bytes * experts_fp8
        };
        // With FP8 weights the stage's matrices drop their BF16 bytes: all 2 where the FP8
        // copies above are kept whole, 2 less the FP8 shard's under ZeRO 3; the routed
        // experts' theirs too.
        let kept = |w: &FpWeights| {
            if zero.shards_weights() {
                w.sharded
            } else {
                0.0
            }
        };
        let dropped = shares.fp8_weights.map_or(0.0, |w| match share.matrices {
            Some(matrices) => (2.0 - kept(&w)) * matrices,
            None => {
                (2.0 - kept(&w)) * dense_fp8 * w.matrix + (2.0 - kept(&w)) * moe_fp8 * w.moe_matrix
            }
        });
        let experts_dropped = shares
            .fp8_weights
            .map_or(0.0, |w| (2.0 - kept(&w)) * experts_fp8);
        StageBase {
            index: i,
            layers: n_layers,
            stored_per_micro_batch: share.stored_per_micro_batch,
            host_per_micro_batch: share.host_per_micro_batch,
            memory: Memory {
                weights: shard(2.0 * psi - dropped, zero.shards_weights(), shards)
                    + copies
                    + shard(
                        2.0 * experts - experts_dropped,
                        zero.shards_weights(),
                        expert_shards,
                    ),
                gradients: shard(
                    opts.gradients.bytes() * psi,
                    zero.shards_gradients(),
                    shards,
                ) + shard(
                    opts.gradients.bytes() * experts,
                    zero.shards_gradients(),
                    expert_shards,
                ),
                optimizer: state * (1.0 - opts.offload_optimizer.get()),
                activations: 0.0,
                detail: Some(Detail {
                    logits: share.logits,
                    transient: share.working + gathered,
                    reserve: 0.0,
                    userbuffers: 0.0,
                    stage: StageInfo {
                        index: i,
                        of: layout.pp,
                        role: StageRole::of(i, layout.pp),
                        layers: n_layers,
                        in_flight: 0.0,
                        micro_batches: shares.m,
                        offloaded_layers: share.offloaded,
                        host_gb: 0.0,
                        optimizer_host_gb: host / BYTES_PER_GB,
                    },
                }),
            },
        }
    }

    /// Memory of the stage that needs the most under this step's schedule, from its
    /// [`Stages`] (worked out for a step that differs from this one at most in its schedule),
    /// or why the schedule does not go with the layout.
    pub fn memory_of(&self, stages: &Stages, layout: &Layout) -> Result<Memory> {
        self.step
            .interleaving_allowed_in(layout, &stages.kinds, stages.m)?;
        let mut worst: Option<Memory> = None;
        let buffers = userbuffers(self.options.stack, &self.step, stages.hidden, layout);
        for stage in stages.stages.iter().flatten() {
            let mut mem = self.stage_memory(stage, layout, stages.m);
            if let Some(d) = mem.detail.as_mut() {
                d.userbuffers = buffers;
            }
            if worst.is_none_or(|w| mem.total() > w.total()) {
                worst = Some(mem);
            }
        }
        Ok(worst.expect("a pipeline has at least one stage"))
    }

    /// `memory_of(stages, layout)?.total()`, bytes, the figure a search weighs, from the
    /// stages' [`StagePeaks`]: the same sums in the same order ([`Detailed::stage_memory`]
    /// and [`Memory::total`]), so the same bytes to the last bit.
    #[inline]
    pub fn peak_bytes(&self, peaks: &StagePeaks, layout: &Layout) -> Result<f64> {
        self.step
            .interleaving_allowed_in(layout, &peaks.kinds, peaks.m)?;
        let reserve = self.options.reserve_gb * BYTES_PER_GB;
        Ok(peaks.stages[..peaks.len]
            .iter()
            .map(|stage| {
                let in_flight = self.step.in_flight(stage.index, layout.pp, peaks.m);
                let held = stage.before_activations + stage.stored_per_micro_batch * in_flight;
                let allocated = held + stage.extra;
                held + (stage.extra + (reserve + self.options.fragmentation * allocated))
            })
            .fold(f64::NEG_INFINITY, f64::max)
            + userbuffers(self.options.stack, &self.step, peaks.hidden, layout))
    }

    /// What `stage` holds under this step's schedule: its activations for the micro-batches
    /// in flight, and the reserve on top of all it allocates.
    fn stage_memory(&self, stage: &StageBase, layout: &Layout, m: u64) -> Memory {
        let in_flight = self.step.in_flight(stage.index, layout.pp, m);
        let mut mem = stage.memory;
        mem.activations = stage.stored_per_micro_batch * in_flight;
        if let Some(d) = mem.detail.as_mut() {
            d.stage.in_flight = in_flight;
            d.stage.host_gb = stage.host_per_micro_batch * in_flight / BYTES_PER_GB;
        }
        let allocated = mem.total();
        if let Some(d) = mem.detail.as_mut() {
            d.reserve =
                self.options.reserve_gb * BYTES_PER_GB + self.options.fragmentation * allocated;
        }
        mem
    }
}

/// One stage's memory before its schedule: all but its stored activations, which are
/// `stored_per_micro_batch` times the micro-batches it holds in flight.
#[derive(Debug, Clone, Copy, PartialEq)]
struct StageBase {
    index: u64,
    layers: u64,
    stored_per_micro_batch: f64,
    /// Activations offloaded to host memory a micro-batch, bytes (`--offload-activations`).
    host_per_micro_batch: f64,
    memory: Memory,
}

/// [`Stages`] as a search weighs them: each representative's sums before its activations, in
/// [`Memory::total`]'s order, and no more ([`Detailed::peak_bytes`]).
#[derive(Debug, Clone, PartialEq, Copy)]
pub struct StagePeaks {
    /// The pipeline's kinds of stage.
    pub kinds: StageKinds,
    /// Micro-batches a step.
    pub m: u64,
    stages: [StagePeak; MAX_STAGE_KINDS],
    len: usize,
    /// The model's hidden size ([`userbuffers`]).
    hidden: u64,
}

/// One representative stage's memory but its activations and reserve, in two sums.
#[derive(Debug, Clone, PartialEq, Copy, Default)]
struct StagePeak {
    index: u64,
    stored_per_micro_batch: f64,
    /// Weights, gradients and optimizer state, summed in that order.
    before_activations: f64,
    /// Logits plus transient (the detail's sum before its reserve).
    extra: f64,
}

/// What each kind's representative stage holds whatever the layout's ZeRO stage and
/// hybrid-sharding replicas ([`Detailed::stage_shares_in`]): a search works it out once for the
/// layouts of the same degrees and finishes it for each ([`Detailed::stage_peaks_of`]).
#[derive(Debug, Clone, PartialEq, Copy)]
pub struct StageShares {
    kinds: StageKinds,
    m: u64,
    stages: [StageShare; MAX_STAGE_KINDS],
    len: usize,
    /// FP8 copies of one layer's matrices on this GPU's TP shard, bytes (0 in BF16).
    fp8_copy: f64,
    /// The same of one MoE layer's dense part (attention, the shared experts; 0 for a dense
    /// model).
    moe_copy: f64,
    /// Bytes of the low-precision copies a matrix parameter (0 in BF16): the routed experts'
    /// copies are this times their parameters.
    copy_bytes: f64,
    /// With FP8 weights (`--fp8-params`), what replaces the BF16 matrices.
    fp8_weights: Option<FpWeights>,
    /// The model's hidden size, which sizes TP overlap's [`userbuffers`].
    hidden: u64,
}

impl StageShares {
    /// The offloaded activations of one layer a micro-batch, bytes, on the stage `index`
    /// (`--offload-activations`): its host bytes over its offloaded layers; 0 for none.
    pub fn offloaded_layer_bytes(&self, index: u64) -> f64 {
        self.stages[..self.len]
            .iter()
            .find(|s| s.index == index && s.offloaded > 0)
            .map_or(0.0, |s| s.host_per_micro_batch / s.offloaded as f64)
    }
}

/// What FP8 weights (`--fp8-params`) change of a stage's weights.
#[derive(Debug, Clone, PartialEq, Copy)]
struct FpWeights {
    /// One layer's matrix parameters on this GPU's TP shard.
    matrix: f64,
    /// One MoE layer's dense part's (0 for a dense model).
    moe_matrix: f64,
    /// Bytes a matrix parameter of FP8 weights sharded by ZeRO 3
    /// ([`crate::cost::step::recipe::Fp8Recipe::stored_weight_bytes`]).
    sharded: f64,
}

/// One representative stage's share of [`StageShares`].
#[derive(Debug, Clone, PartialEq, Copy, Default)]
struct StageShare {
    index: u64,
    layers: u64,
    /// Of its layers, the mixtures of experts, and of those the ones kept in BF16 under FP8.
    moe: u64,
    moe_bf16: u64,
    /// Of its layers, those kept in BF16 under FP8 (no FP8 copies).
    bf16: u64,
    stored_per_micro_batch: f64,
    /// Of its layers, those whose activations go to host memory, and their bytes a
    /// micro-batch.
    offloaded: u64,
    host_per_micro_batch: f64,
    /// Parameters on this GPU's TP shard (ψ), the routed experts' left out.
    psi: f64,
    /// Routed-expert parameters on this GPU ([`stage_expert_params`]; 0 for a dense model).
    experts: f64,
    /// The logits the loss keeps and the head's inputs (0 but on the last stage).
    logits: f64,
    /// The larger of a layer's backward working set and the loss's peak.
    working: f64,
    /// The largest unit ZeRO 3 gathers whole, parameters.
    unit: f64,
    /// A hybrid model's stage's matrices on this GPU that a low-precision step keeps copies
    /// of, its routed experts' apart ([`hybrid_stage_matrices`]); `None` for a shape without a
    /// pattern, whose layers count theirs.
    matrices: Option<f64>,
    /// Its layers' matrices on this GPU, the routed experts' apart: what Muon steps
    /// ([`crate::cost::step::muon`]).
    hidden_matrices: f64,
}

impl StageBase {
    /// What a search weighs of this stage ([`StagePeak`]).
    fn peak(&self) -> StagePeak {
        let m = &self.memory;
        StagePeak {
            index: self.index,
            stored_per_micro_batch: self.stored_per_micro_batch,
            before_activations: m.weights + m.gradients + m.optimizer,
            extra: m.detail.map_or(0.0, |d| d.logits + d.transient),
        }
    }
}

#[cfg(test)]
impl Stages {
    /// What a search needs of these stages to weigh each schedule ([`StagePeaks`]), as
    /// [`Detailed::stage_peaks_in`] builds it directly.
    fn peaks(&self) -> StagePeaks {
        let mut stages = [StagePeak::default(); MAX_STAGE_KINDS];
        let mut len = 0;
        for (peak, stage) in stages.iter_mut().zip(self.stages.iter().flatten()) {
            *peak = stage.peak();
            len += 1;
        }
        StagePeaks {
            kinds: self.kinds,
            m: self.m,
            stages,
            len,
            hidden: self.hidden,
        }
    }
}

/// The pipeline of a step under a layout and what its stages that can need the most hold,
/// before the schedule: [`Detailed::stages`].
#[derive(Debug, Clone, PartialEq, Copy)]
pub struct Stages {
    /// The pipeline's kinds of stage.
    pub kinds: StageKinds,
    /// Micro-batches a step.
    pub m: u64,
    /// What each kind's representative holds before its activations.
    stages: [Option<StageBase>; MAX_STAGE_KINDS],
    /// The model's hidden size ([`userbuffers`]).
    hidden: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::cost::step::detailed::Options;
    use crate::cost::step::pipeline::stage_kinds;
    use crate::cost::step::recipe::{Bf16Layers, MasterWeights, OptimizerStates};
    use crate::cost::step::stack::Stack;
    use crate::cost::step::Recompute;
    use crate::cost::step::Schedule;
    use crate::cost::step::Step;
    use crate::model::layout::ZeroStage;
    use crate::model::preset;

    fn step(recompute: Recompute, sp: bool) -> Step {
        Step {
            micro_batch: 1,
            seq_len: 8192,
            recompute,
            sequence_parallel: sp,
            schedule: Schedule::OneFOneB,
            tp_comm_overlap: false,
            precision: crate::cost::step::precision::Precision::Bf16,
            global_batch_tokens: 16 * 1024 * 1024,
        }
    }

    fn bare() -> Options {
        Options {
            reserve_gb: 0.0,
            fragmentation: 0.0,
            gradients: GradientPrecision::Bf16,
            ..Options::default()
        }
    }

    fn memory(model: &str, tp: u64, pp: u64, zero: u8, step: Step, options: Options) -> Memory {
        let s = preset(model).unwrap();
        let l = Layout::new(&Brief::default(), &s, tp, pp, ZeroStage::new(zero).unwrap()).unwrap();
        Detailed { step, options }.memory(&s, &l).unwrap()
    }

    #[test]
    fn stages_split_evenly_or_as_llama_3_did() {
        use crate::cost::step::pipeline::stage_layers;
        assert_eq!(stage_layers(80, 8, StageSplit::Even).unwrap(), [10; 8]);
        assert_eq!(
            stage_layers(126, 4, StageSplit::Even).unwrap(),
            [31, 31, 32, 32]
        );
        let llama = stage_layers(126, 16, StageSplit::Llama3).unwrap();
        assert_eq!(
            (llama[0], llama[1], llama[15], llama.iter().sum::<u64>()),
            (7, 8, 7, 126)
        );
        assert!(stage_layers(80, 16, StageSplit::Llama3).is_err());
        let bloom = stage_layers(70, 12, StageSplit::Balanced).unwrap();
        assert_eq!(
            (bloom[0], bloom[1], bloom[11], bloom.iter().sum::<u64>()),
            (5, 6, 5, 70)
        );
        // MT-NLG: 107 units do not divide over 35 stages: 3 layers each.
        assert_eq!(
            stage_layers(105, 35, StageSplit::Balanced).unwrap(),
            [3; 35]
        );
        assert!(stage_layers(80, 81, StageSplit::Even).is_err());
        // The loss as a layer and DeepSeek-V3's prediction depth as two: 61 + 3 = 64 units,
        // 4 a stage on PP 16 and one layer on the last, as Megatron-Bridge's layout
        // `Et*4|(t*4|)*14,tmL`; on PP 4, 16 a stage and 13 on the last (its `t*13mL`).
        let mut v3 = crate::model::testing::latent(61);
        v3.mtp = 1;
        let loss = |pp| crate::cost::step::pipeline::shape_stages(&v3, pp, StageSplit::Loss);
        let sixteen = loss(16).unwrap();
        assert_eq!((sixteen[0], sixteen[14], sixteen[15]), (4, 4, 1));
        assert_eq!(loss(4).unwrap(), [16, 16, 16, 13]);
        // Without a depth the loss alone: 80 + 1 units do not divide over 8 stages.
        assert_eq!(stage_layers(80, 8, StageSplit::Loss).unwrap(), [10; 8]);
        assert_eq!(
            stage_layers(79, 8, StageSplit::Loss).unwrap(),
            [10, 10, 10, 10, 10, 10, 10, 9]
        );
    }

    #[test]
    fn with_bf16_gradients_and_no_reserve_the_states_are_16_bytes_per_parameter() {
        // PP = 1: the stage holds all N parameters, split over TP but for the norms.
        let s = preset("70b").unwrap();
        let m = memory("70b", 1, 1, 0, step(Recompute::Full, false), bare());
        let states = m.weights + m.gradients + m.optimizer;
        assert_eq!(states, 16.0 * s.params() as f64);
    }

    #[test]
    fn fp32_gradients_with_zero_1_give_megatron_s_6_plus_12_over_dp_bytes() {
        // Megatron-LM theoretical_memory_usage.py: 18 bytes per parameter, or 6 + 12/DP with
        // the distributed optimizer (ZeRO 1). TP = 1, PP = 1, DP = 2048.
        let s = preset("8b").unwrap();
        let fp32 = Options {
            gradients: GradientPrecision::Fp32,
            ..bare()
        };
        let n = s.params() as f64;
        let zero0 = memory("8b", 1, 1, 0, step(Recompute::Full, false), fp32);
        assert_eq!(zero0.weights + zero0.gradients + zero0.optimizer, 18.0 * n);
        let zero1 = memory("8b", 1, 1, 1, step(Recompute::Full, false), fp32);
        let per_param = (zero1.weights + zero1.gradients + zero1.optimizer) / n;
        assert!((per_param - (6.0 + 12.0 / 2048.0)).abs() < 1e-12);
    }

    #[test]
    fn fp8_weights_drop_the_bf16_matrices_and_bf16_layers_their_fp8_copies() {
        // Llama 3 70B at TP 4 × PP 8, ZeRO 1, FP8: a layer's matrices are 855,638,016
        // parameters, 213,909,504 on a TP rank; the first stage holds 10 layers.
        let s = preset("70b").unwrap();
        let l = Layout::new(&Brief::default(), &s, 4, 8, ZeroStage::new(1).unwrap()).unwrap();
        assert_eq!(s.layer_matrix_params(), 855_638_016);
        let matrix = 213_909_504.0;
        let fp8 = Step {
            precision: crate::cost::step::precision::Precision::Fp8,
            ..step(Recompute::Full, true)
        };
        let memory = |options: Options| Detailed { step: fp8, options }.memory(&s, &l).unwrap();
        let base = memory(bare());
        // --fp8-params: 2 bytes a matrix parameter fewer, 10 layers: 4,278,190,080 bytes.
        let params = memory(Options {
            fp8_params: true,
            ..bare()
        });
        assert_eq!(base.weights - params.weights, 2.0 * 10.0 * matrix);
        assert_eq!(base.weights - params.weights, 4_278_190_080.0);
        // The first and last layers in BF16 on one stage (PP 1): their FP8 copies and
        // transposes (2 bytes a parameter) gone. (Under PP the first stage then needs less,
        // and another stage may be the one reported.)
        let one = Layout::new(&Brief::default(), &s, 4, 1, ZeroStage::new(1).unwrap()).unwrap();
        let on_one = |options: Options| Detailed { step: fp8, options }.memory(&s, &one).unwrap();
        let ends = on_one(Options {
            bf16_layers: Bf16Layers { start: 1, end: 1 },
            ..bare()
        });
        assert_eq!(on_one(bare()).weights - ends.weights, 2.0 * 2.0 * matrix);
        // The precision-aware optimizer: 12 → 8 → 6 bytes a parameter of the sharded state.
        let states = memory(Options {
            optimizer_states: OptimizerStates::Bf16,
            ..bare()
        });
        let remainders = memory(Options {
            optimizer_states: OptimizerStates::Bf16,
            master_weights: MasterWeights::Remainders,
            ..bare()
        });
        assert_eq!(states.optimizer / base.optimizer, 8.0 / 12.0);
        assert_eq!(remainders.optimizer / base.optimizer, 6.0 / 12.0);
    }

    #[test]
    fn transformer_engine_s_loss_keeps_bf16_logits_and_no_more_at_its_peak() {
        // Llama 3 8B whole on one GPU, full recomputation, one 8,192-token sequence: the
        // logits are 8,192 × 128,256 = 1,050,673,152 values. Kept: 4 bytes each in FP32, 2 in
        // BF16 and in place. At the loss's peak: 6 and 2 more in FP32 and BF16, none in place,
        // so the transient is the loss's in FP32 and the backward's working set, below 2 bytes
        // a logit, in place.
        use crate::cost::step::stack::LossPrecision::{Bf16, Fp32, InPlace};
        let s = preset("8b").unwrap();
        let l = Layout::new(&Brief::default(), &s, 1, 1, ZeroStage::new(1).unwrap()).unwrap();
        let at = |loss| {
            let options = Options { loss, ..bare() };
            let detail = Detailed {
                step: step(Recompute::Full, false),
                options,
            }
            .memory(&s, &l)
            .unwrap()
            .detail
            .unwrap();
            (detail.logits, detail.transient)
        };
        let values = 1_050_673_152.0;
        let ((fp32, fp32_peak), (bf16, bf16_peak), (in_place, in_place_peak)) =
            (at(Fp32), at(Bf16), at(InPlace));
        assert_eq!(fp32 - in_place, 2.0 * values);
        assert_eq!(bf16, in_place);
        assert_eq!(fp32_peak, 6.0 * values);
        assert!(in_place_peak < bf16_peak, "{in_place_peak} {bf16_peak}");
        assert!(in_place_peak < 2.0 * values, "{in_place_peak}");
    }

    #[test]
    fn on_blackwell_a_per_tensor_fp8_weight_is_one_copy_and_a_block_scaled_one_two() {
        // The same Llama 3 70B stage (10 layers of 213,909,504 matrix parameters a TP rank):
        // FP8 GEMMs that take any layout keep no transpose, 1 byte a parameter less,
        // 2,139,095,040 bytes; MXFP8 keeps both orientations, as on any GPU.
        let s = preset("70b").unwrap();
        let l = Layout::new(&Brief::default(), &s, 4, 8, ZeroStage::new(1).unwrap()).unwrap();
        let at = |precision, options: Options| {
            let step = Step {
                precision,
                ..step(Recompute::Full, true)
            };
            Detailed { step, options }.memory(&s, &l).unwrap()
        };
        use crate::cost::step::precision::Precision::{Fp8, Mxfp8};
        for fp8_params in [false, true] {
            let hopper = Options {
                fp8_params,
                ..bare()
            };
            let blackwell = hopper.on_gpu(true);
            let drop = at(Fp8, hopper).weights - at(Fp8, blackwell).weights;
            assert_eq!(drop, 2_139_095_040.0);
            assert_eq!(at(Mxfp8, hopper).weights, at(Mxfp8, blackwell).weights);
        }
    }

    #[test]
    fn fp8_experts_keep_their_copies_and_with_fp8_weights_drop_their_bf16_bytes() {
        // Llama 3 8B's attention with 8 experts of 14,336 (top 2) on every layer, TP 1, EP 8:
        // a layer's attention matrices 2·4096² + 2·4096·1024 = 41,943,040 and its one local
        // expert 3·4096·14,336 = 176,160,768: 218,103,808 a layer, 6,979,321,856 over 32
        // layers, whose FP8 copy and transpose (delayed scaling) take 2 bytes each.
        use crate::cost::step::precision::Precision::{self, Bf16, Fp8, Nvfp4};
        fn at(s: &Shape, l: &Layout, precision: Precision, options: Options) -> Result<Memory> {
            let step = Step {
                precision,
                ..step(Recompute::Full, false)
            };
            Detailed { step, options }.memory(s, l)
        }
        let with_params = |fp8_params| Options {
            fp8_params,
            ..bare()
        };
        let ends = |start, end| Options {
            bf16_layers: Bf16Layers { start, end },
            ..bare()
        };
        let mut s = preset("8b").unwrap();
        s.experts = Some(crate::model::Experts::plain(8, 2, 14_336));
        let mut l = Layout::new(&Brief::default(), &s, 1, 1, ZeroStage::new(1).unwrap()).unwrap();
        (l.ep, l.etp) = (8, 1);
        let weights =
            |s: &Shape, precision, options| at(s, &l, precision, options).unwrap().weights;
        let fp8 = weights(&s, Fp8, bare());
        assert_eq!(fp8 - weights(&s, Bf16, bare()), 2.0 * 6_979_321_856.0);
        // --fp8-params: their BF16 bytes (2 a parameter) go, the experts' with the rest.
        assert_eq!(
            fp8 - weights(&s, Fp8, with_params(true)),
            2.0 * 6_979_321_856.0
        );
        // The first and last layers kept in BF16, both MoE layers: their copies go, the
        // experts' with them, 2 · 2 · 218,103,808 bytes.
        assert_eq!(
            fp8 - weights(&s, Fp8, ends(1, 1)),
            2.0 * 2.0 * 218_103_808.0
        );
        // Experts of 7,168 from the second layer on: the first layer is dense (218,103,808
        // matrix parameters), an MoE layer 41,943,040 + 3·4096·7168 = 130,023,424; a BF16 layer
        // at either end drops its own kind's copies.
        let mut e = crate::model::Experts::plain(8, 2, 7_168);
        e.layers = crate::model::LayerSet::Every { first: 1, step: 1 };
        s.experts = Some(e);
        let none = weights(&s, Fp8, ends(0, 0));
        assert_eq!(none - weights(&s, Fp8, ends(1, 0)), 2.0 * 218_103_808.0);
        assert_eq!(none - weights(&s, Fp8, ends(0, 1)), 2.0 * 130_023_424.0);
        // FP4 experts, and FP8 experts under ZeRO 3, are refused by name.
        let e = at(&s, &l, Nvfp4, bare()).unwrap_err().to_string();
        assert!(e.contains("FP4 experts"), "{e}");
        l.zero = ZeroStage::new(3).unwrap();
        let e = at(&s, &l, Fp8, bare()).unwrap_err().to_string();
        assert!(e.contains("--zero = 3"), "{e}");
    }

    #[test]
    fn fp4_steps_keep_their_weights_fp4_copies_as_fp8_steps_keep_theirs() {
        // Llama 3 70B at TP 4 × PP 8, ZeRO 1: 10 layers of 213,909,504 matrix parameters on a
        // TP rank. Transformer Engine caches each step's low-precision weights across the
        // micro-batches in every recipe: FP8's copy and transpose, 2 bytes a parameter; NVFP4's
        // rowwise and columnwise copies, each half a byte and an E4M3 scale per 16: 2 × 9/16 =
        // 1.125 bytes (MXFP4's E8M0 scale per 32: 2 × 17/32 = 1.0625). The step's time casts
        // them once a step, so memory keeps them.
        let s = preset("70b").unwrap();
        let l = Layout::new(&Brief::default(), &s, 4, 8, ZeroStage::new(1).unwrap()).unwrap();
        let matrix = 10.0 * 213_909_504.0;
        let weights = |precision| {
            let step = Step {
                precision,
                ..step(Recompute::Full, true)
            };
            Detailed {
                step,
                options: bare(),
            }
            .memory(&s, &l)
            .unwrap()
            .weights
        };
        use crate::cost::step::precision::Precision;
        let bf16 = weights(Precision::Bf16);
        assert_eq!(weights(Precision::Fp8) - bf16, 2.0 * matrix);
        assert_eq!(weights(Precision::Nvfp4) - bf16, 1.125 * matrix);
        assert_eq!(weights(Precision::Mxfp4) - bf16, 1.0625 * matrix);
    }

    #[test]
    fn te_s_userbuffers_are_twelve_buffers_of_s_b_h_over_cp() {
        // Llama 3 70B (h 8,192), s 8,192, b 1, TP 8: 12 BF16 buffers of 8,192 × 8,192 elements,
        // 1,610,612,736 bytes; under FP8 eight of them hold a byte: 8,192² × 16.
        let s = preset("70b").unwrap();
        let l = Layout::new(&Brief::default(), &s, 8, 4, ZeroStage::new(1).unwrap()).unwrap();
        let on = Step {
            tp_comm_overlap: true,
            ..step(Recompute::Full, true)
        };
        let te = Stack::MegatronTe;
        assert_eq!(userbuffers(te, &on, s.hidden, &l), 1_610_612_736.0);
        let fp8 = Step {
            precision: crate::cost::step::precision::Precision::Fp8,
            ..on
        };
        assert_eq!(userbuffers(te, &fp8, s.hidden, &l), 1_073_741_824.0);
        // Megatron-LM's shape is [s·b/CP, h]: two sequences a micro-batch over CP 2 hold one
        // sequence's worth.
        let cp2 = Layout { cp: 2, ..l };
        let b2 = Step {
            micro_batch: 2,
            ..on
        };
        assert_eq!(userbuffers(te, &b2, s.hidden, &cp2), 1_610_612_736.0);
        // None without the overlap, without TP, or on MaxText's XLA collective matmuls.
        let off = step(Recompute::Full, true);
        assert_eq!(userbuffers(te, &off, s.hidden, &l), 0.0);
        assert_eq!(userbuffers(te, &on, s.hidden, &Layout { tp: 1, ..l }), 0.0);
        assert_eq!(userbuffers(Stack::Maxtext, &on, s.hidden, &l), 0.0);
    }

    #[test]
    fn a_step_with_tp_overlap_holds_its_twin_s_memory_and_the_userbuffers() {
        // The step's total is the twin's plus the buffers, to the bit, and the reserve's GB
        // figure carries them.
        let off = Step {
            micro_batch: 2,
            ..step(Recompute::Selective, true)
        };
        let on = Step {
            tp_comm_overlap: true,
            ..off
        };
        let without = memory("70b", 8, 4, 1, off, Options::default());
        let with = memory("70b", 8, 4, 1, on, Options::default());
        let buffers = 2.0 * 8192.0 * 8192.0 * 24.0;
        assert_eq!(
            with.total().to_bits(),
            (without.total() + buffers).to_bits()
        );
        assert_eq!(with.detail.unwrap().userbuffers, buffers);
        assert_eq!(without.detail.unwrap().userbuffers, 0.0);
        let gb = |m: &Memory| m.in_gb().reserve.unwrap();
        assert!((gb(&with) - gb(&without) - buffers / 1e9).abs() < 1e-9);
    }

    #[test]
    fn the_first_stage_holds_pp_micro_batches_of_its_layers() {
        // 70B, TP 8 + SP, PP 8 (10 layers a stage), full recompute: the first stage keeps
        // 8 micro-batches × 10 layers × 2·s·h/8 bytes.
        let m = memory("70b", 8, 8, 1, step(Recompute::Full, true), bare());
        let d = m.detail.unwrap();
        assert_eq!((d.stage.index, d.stage.role), (0, StageRole::First));
        assert_eq!(m.activations, 8.0 * 10.0 * 2.0 * 8192.0 * 8192.0 / 8.0);
    }

    #[test]
    fn the_last_stage_keeps_fp32_logits_and_the_head_s_inputs() {
        // 8B at PP 1: the only stage keeps 4·s·V/TP bytes of log-probabilities and the head's
        // and final norm's inputs, 2·s·h each: 4,336,910,336 B at TP 1.
        let m = memory("8b", 1, 1, 3, step(Recompute::Full, false), bare());
        let d = m.detail.unwrap();
        assert_eq!(d.logits, 4.0 * 8192.0 * 128_256.0 + 4.0 * 8192.0 * 4096.0);
        // The transient is the loss's forward peak above that, 6 more bytes a logit, and ZeRO 3's
        // buffers: two units of BF16 weights and one of BF16 gradients, the unit the output
        // head (128,256 × 4,096 parameters, larger than a layer).
        let head = 128_256.0 * 4096.0;
        assert_eq!(d.transient, 6.0 * 8192.0 * 128_256.0 + 6.0 * head);
    }

    #[test]
    fn a_search_s_two_sums_a_stage_give_the_whole_memory_s_total_to_the_bit() {
        // 405B (126 layers: uneven stages) and 70B, every recompute mode, both schedules,
        // each ZeRO stage, with the default reserve and fragmentation.
        let brief = Brief::default();
        let options = Options::default();
        let mut compared = 0;
        for (model, tp, pp) in [
            ("70b", 8, 4),
            ("70b", 4, 1),
            ("405b", 8, 16),
            ("405b", 8, 32),
        ] {
            let s = preset(model).unwrap();
            for zero in 0..=3 {
                let zero = ZeroStage::new(zero).unwrap();
                let l = Layout::new(&brief, &s, tp, pp, zero).unwrap();
                let kinds = stage_kinds(&s, &l, options.stages).unwrap();
                for (recompute, b, schedule, overlap) in itertools::iproduct!(
                    Recompute::ALL,
                    [1, 2],
                    [Schedule::OneFOneB, Schedule::Interleaved(2)],
                    [false, true]
                ) {
                    let step = Step {
                        micro_batch: b,
                        schedule,
                        tp_comm_overlap: overlap,
                        ..step(recompute, true)
                    };
                    let d = Detailed { step, options };
                    let (Ok(stages), Ok(peaks)) = (
                        d.stages_in(&s, &l, &kinds),
                        d.stage_peaks_in(&s, &l, &kinds),
                    ) else {
                        continue;
                    };
                    assert_eq!(stages.peaks(), peaks);
                    let whole = d.memory_of(&stages, &l).map(|m| m.total().to_bits());
                    let weighed = d.peak_bytes(&peaks, &l).map(f64::to_bits);
                    assert_eq!(whole.ok(), weighed.ok(), "{model} {l:?} {step:?}");
                    compared += 1;
                }
            }
        }
        assert!(compared >= 300, "{compared}");
    }

    #[test]
    fn the_stages_shares_of_one_set_of_degrees_give_every_zero_stage_and_replica_count_its_peaks_to_the_bit(
    ) {
        // What the stages hold whatever the sharding, worked out under ZeRO 0 with one shard
        // group, finished for each ZeRO stage and replica count of the same TP, CP, PP and DP,
        // is what each layout's own stage sums are: 70B and 405B (uneven stages), each
        // precision and recomputation.
        use crate::cost::step::precision::Precision;
        use crate::model::layout::every_sharding;
        let options = Options::default();
        let mut compared = 0;
        for (model, tp, cp, pp) in [("70b", 8, 1, 4), ("70b", 4, 2, 1), ("405b", 8, 1, 16)] {
            let s = preset(model).unwrap();
            let layouts = every_sharding(&s, tp, cp, pp);
            let first = &layouts[0];
            let kinds = stage_kinds(&s, first, options.stages).unwrap();
            for (recompute, precision) in itertools::iproduct!(Recompute::ALL, Precision::ALL) {
                let d = Detailed {
                    step: Step {
                        precision,
                        ..step(recompute, true)
                    },
                    options,
                };
                let Ok(shares) = d.stage_shares_in(&s, first, &kinds) else {
                    continue;
                };
                for l in &layouts {
                    let own = d.stage_peaks_in(&s, l, &kinds).unwrap();
                    assert_eq!(d.stage_peaks_of(&shares, l), own, "{model} {l:?} {d:?}");
                    compared += 1;
                }
            }
        }
        assert!(compared >= 400, "{compared}");
    }

    #[test]
    fn the_reserve_is_fixed_plus_a_fraction() {
        let with = memory(
            "70b",
            8,
            8,
            1,
            step(Recompute::Full, true),
            Options::default(),
        );
        let d = with.detail.unwrap();
        let rest = with.total() - d.reserve;
        assert!((d.reserve - (2e9 + 0.05 * rest)).abs() < 1.0);
    }

    #[test]
    fn less_recomputation_needs_more_memory() {
        let full = memory("70b", 8, 8, 1, step(Recompute::Full, true), bare());
        let none = memory("70b", 8, 8, 1, step(Recompute::None, true), bare());
        assert!(none.activations > 10.0 * full.activations);
    }
}
