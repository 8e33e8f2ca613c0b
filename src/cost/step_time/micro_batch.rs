//! One micro-batch's compute on one TP × CP rank, per layer and for the head: what the rest of
//! a step's time is built on, on the chip's kernel figures ([`crate::cost::chip::operations`])
//! or the eager curve.

use crate::cost::chip::chip_for;
use crate::cost::chip::flops::layer_flops;
use crate::cost::chip::flops::layer_forward_flops;
use crate::cost::chip::narrow_for;
use crate::cost::chip::operations::Context;
use crate::cost::chip::operations::StageCompute;
use crate::cost::step::detailed::Detailed;
use crate::cost::step::experts::Routed;
use crate::cost::step::stack::CpComm;
use crate::cost::step::Step;
use crate::cost::step_time::options::overlaps;
use crate::cost::step_time::options::TimeOptions;
use crate::cost::Machine;
use crate::error::Error;
use crate::error::Result;
use crate::model::layout::Layout;
use crate::model::Shape;
use crate::units::FLOPS_PER_TFLOPS;
/// One micro-batch's compute on one TP × CP rank, per layer and for the head: what the rest of
/// a step is built on. It depends on the layout only through TP and CP and on the step only
/// through [`MicroBatch::key`] (not its schedule or global batch), so a search works it out
/// once for each such key and reuses it across pipelines, ZeRO stages, replicas, interleaving
/// depths and batches ([`MicroBatchCache`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MicroBatch {
    /// One layer's (all, forward, GEMMs, recomputed ones included), seconds.
    pub(super) layer: StageCompute,
    /// The head's (all, forward), seconds.
    pub(super) head: (f64, f64),
    /// One layer's attention core (forward, backward), seconds.
    pub(super) attention: (f64, f64),
    /// One MoE layer's (all, forward, GEMMs), seconds, and its routing; `None` for a dense
    /// shape.
    pub(super) moe: Option<(StageCompute, Routed)>,
    /// One MoE layer's part ahead of its tokens-per-expert synchronisation, (all) seconds:
    /// its dense part (attention, norms, shared experts), the GPU time the host's launches
    /// of that part can hide behind ([`crate::cost::step::graphs`]); 0 for a dense shape.
    pub(super) moe_before: f64,
    /// One layer's (all, forward, GEMMs) kept in BF16 under FP8 (`--fp8-bf16-layers`);
    /// `None` where none is.
    pub(super) bf16_layer: Option<StageCompute>,
    /// A hybrid model's blocks' (all, forward, GEMMs) by kind
    /// ([`crate::cost::chip::operations::Context::hybrid_blocks`]); `None` for a shape
    /// without a pattern.
    pub(super) blocks: Option<Blocks>,
}

/// Each kind of a hybrid model's blocks' (all, forward, GEMMs) per micro-batch: Mamba-2,
/// attention, MLP, and mixture of experts (zero without experts).
pub type Blocks = [StageCompute; 4];

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
            let recipe = d.recipe();
            let narrow_ceiling = if precision.is_narrow() {
                let factor = recipe.map_or(1.0, |r| r.gemm_factor(machine.mxfp8));
                narrow_for(machine, chip, stack, precision)? * factor
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
                narrow_peak_flops: precision.peak_tflops(
                    machine.peak_tflops,
                    machine.fp8_tflops,
                    machine.fp4_tflops,
                ) * FLOPS_PER_TFLOPS,
                narrow_ceiling,
                fp8_recipe: recipe,
                latent_recompute: d.options.latent_recompute,
                fp8_any_layout: d.options.fp8_any_layout,
            };
            let l = ctx.layer(shape, step.recompute);
            // TP collectives overlap the GEMMs, the recomputed forward's among them.
            let gemm = l.gemm.forward + l.gemm.backward + l.recompute;
            let o = ctx.head(shape);
            let moe_before = if routed.is_some() {
                ctx.layer(&crate::model::moe_dense_part(shape), step.recompute)
                    .total()
            } else {
                0.0
            };
            let moe = routed.map(|r| {
                let l = ctx.moe_layer(shape, step.recompute, d.options.moe_recompute, &r);
                let gemm = l.gemm.forward + l.gemm.backward + l.recompute;
                ((l.total(), l.forward(), gemm), r)
            });
            // The layers kept in BF16 run as BF16 does.
            let bf16_layer = (precision.is_fp8() && !d.options.bf16_layers.is_none()).then(|| {
                let bf16 = Context {
                    precision: crate::cost::step::precision::Precision::Bf16,
                    fp8_recipe: None,
                    ..ctx
                };
                let l = bf16.layer(shape, step.recompute);
                (
                    l.total(),
                    l.forward(),
                    l.gemm.forward + l.gemm.backward + l.recompute,
                )
            });
            let compute = |l: &crate::cost::chip::operations::LayerTime| {
                (
                    l.total(),
                    l.forward(),
                    l.gemm.forward + l.gemm.backward + l.recompute,
                )
            };
            let blocks = ctx
                .hybrid_blocks(
                    shape,
                    step.recompute,
                    d.options.moe_recompute,
                    routed.as_ref(),
                )
                .map(|b| {
                    [
                        compute(&b.mamba),
                        compute(&b.attention),
                        compute(&b.mlp),
                        b.moe.as_ref().map_or((0.0, 0.0, 0.0), compute),
                    ]
                });
            Ok(MicroBatch {
                layer: (l.total(), l.forward(), gemm),
                head: (o.forward + o.backward, o.forward),
                attention: (l.attention.forward, l.attention.backward),
                moe,
                moe_before,
                bf16_layer,
                blocks,
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
            // The eager stack's attention takes a window as a mask over every score: the work
            // of full causal attention.
            let unwindowed;
            let shape = if shape.windowed(step.seq_len).is_some() {
                let mut full = shape.clone();
                full.architecture.sliding_window = None;
                full.architecture.window_layers = None;
                unwindowed = full;
                &unwindowed
            } else {
                shape
            };
            let (per_layer, forward_per_layer) =
                layer_flops(shape, tp, step.seq_len, step.recompute);
            // The head, and each multi-token-prediction depth's head and projection.
            let depths = f64::from(shape.mtp);
            let one_head = (2.0 * v * h * (1.0 + depths) + 2.0 * 2.0 * h * h * depths) / tp as f64;
            let all = tokens * per_layer / rate;
            let (_, attention_per_token) = layer_forward_flops(shape, tp, step.seq_len);
            let attention = tokens * attention_per_token / rate;
            Ok(MicroBatch {
                layer: (all, tokens * forward_per_layer / rate, all),
                head: (tokens * 3.0 * one_head / rate, tokens * one_head / rate),
                attention: (attention, 2.5 * attention),
                moe: None,
                moe_before: 0.0,
                bf16_layer: None,
                blocks: None,
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
