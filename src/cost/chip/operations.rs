//! Compute time as a sum over operations: each GEMM at its own (m, n, k), attention at a
//! FlashAttention-class kernel's throughput, element-wise work as HBM traffic.
//!
//! Per layer and micro-batch of `T = b·s` tokens on one TP rank of `t` (`h` hidden, `q = a·d`
//! the attention width, `g = kv·d` the width of K and V, `f` the FFN width):
//!
//! | operation | forward GEMM (m, n, k) |
//! |---|---|
//! | QKV projection | (T, (q + 2g)/t, h) |
//! | attention output | (T, h, q/t) |
//! | gate and up | (T, 2f/t, h) |
//! | down | (T, h, f/t) |
//! | output head (last stage) | (T, V/t, h) |
//!
//! Backward runs each GEMM twice: the input gradient (T, k, n) and the weight gradient
//! (k, n, T). Where the stack overlaps TP collectives with the projections, the forward and the
//! input gradient run as `t` GEMMs of `T/t` rows ([`Context::tp_chunks`]). A GEMM takes `2·m·n·k / (peak · fraction(m, n) · sustained)` seconds, the fraction
//! from [`Chip::gemm_fraction`] (a ceiling, tile and wave quantization), or its operands' and
//! result's BF16 bytes over the HBM bandwidth if that is longer (the roofline).
//!
//! **Attention** with FlashAttention-class kernels runs `2·b·s²·q/t` FLOPs forward (causal: half
//! of QKᵀ and AV) and 2.5 times that backward, at the kernel's forward + backward throughput for
//! the sequence ([`Chip::attention_fraction`]). Unfused attention runs QKᵀ and AV as batched GEMMs
//! over the whole square (`b·a/t` products of (s, s, d) and (s, d, s)) and moves each BF16 score
//! through a fused scale-mask-softmax, 4 bytes forward and 6 backward.
//!
//! **Element-wise** work moves bytes at [`HBM_EFFICIENCY`] of the bandwidth. Per token, forward
//! (backward moves twice as much: it reads what forward read and the incoming gradient, and
//! writes a gradient for each input):
//!
//! | kernels | h-wide (÷t with sequence parallelism) | split over TP |
//! |---|---|---|
//! | fused | two RMSNorms (read 2h, write 2h) and two residual adds (read 4h, write 2h): 20h | RoPE on Q and K in place, 4(q + g); SwiGLU reads 4f, writes 2f: 6f |
//! | eager | each FP32 RMSNorm of Llama's reference code casts, squares, averages, scales, casts back and weights: 36h; two, and the residual adds: 84h | RoPE through FP32 complex numbers, 20 bytes an element: 20(q + g); K and V repeated to every head: 4q + 4g; SiLU then a product: 10f |
//!
//! The **loss** over the last stage's `T·V/t` logits moves 24 bytes a logit in a fused FP32
//! cross-entropy (read the BF16 logits, max, exponentials, sum; backward the softmax less the
//! one-hot), 40 in eager PyTorch (an FP32 copy, `log_softmax`'s two passes, and their
//! backward), 8 in a chunked one that never writes the FP32 logits.
//!
//! `sustained` is the calibrated fraction of these kernel benchmarks' FLOP rates that a training
//! step's GEMMs and attention keep (traffic is already at a measured in-step bandwidth) ([`crate::cost::chip::calibration`]): the benchmarks run one kernel at boost clock on an
//! idle GPU; a step shares the SMs with communication kernels and holds power-limited clocks.

use crate::cost::step::Recompute;

use crate::cost::step::stack::Kernels;

use crate::cost::chip::{Chip, FP4_BK, FP8_BK, HBM_EFFICIENCY};
use crate::cost::step::experts::Routed;
use crate::cost::step::precision::{Precision, CAST_BYTES, FUSED_CAST_BYTES};
use crate::cost::step::recipe::Fp8Recipe;
use crate::cost::step::stack::Attention;
use crate::cost::step::stack::LossKernel;
use crate::cost::step::MoeRecompute;
use crate::model::Shape;
use crate::model::{moe_dense_part, without_shared};
use crate::model::{AttentionWidths, LatentWidths};

/// SMs a Transformer Engine userbuffers reduce-scatter takes while it overlaps its GEMM's
/// chunks: `num_sm: 24` for `proj_fprop` and `fc2_fprop` (the `pipeline` method) in NVIDIA's
/// published userbuffers configurations for Megatron-core; the all-gathers' ring exchange
/// runs on copy engines and one SM, not counted.
pub const OVERLAP_SMS: f64 = 24.0;

/// The rows of one tile of a grouped GEMM, to which each expert's routes are padded: the
/// smallest M of the tiles the GEMM model knows ([`crate::cost::chip::TILES`]).
pub const GROUP_ROWS: f64 = 128.0;

/// Where the operations run and how: the chip, the brief's peak and bandwidth, the kernels,
/// and the shard of the micro-batch.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The chip's kernel figures.
    pub chip: &'a Chip,
    /// Its GEMM ceiling ([`Chip::gemm_ceiling`]), computed once.
    pub gemm_ceiling: f64,
    /// Dense BF16 peak, FLOP/s.
    pub peak_flops: f64,
    /// HBM bandwidth, bytes/s.
    pub hbm_bytes_per_second: f64,
    /// Fraction of the kernel benchmarks a step keeps.
    pub sustained: f64,
    /// Element-wise kernels fused or eager.
    pub elementwise: Kernels,
    /// The attention kernel.
    pub attention: Attention,
    /// The loss kernel.
    pub loss: LossKernel,
    /// TP degree.
    pub tp: u64,
    /// Sequence parallelism.
    pub sequence_parallel: bool,
    /// Chunks each projection and its input gradient run in, 1 or `tp`: overlapping the TP
    /// collectives with the GEMMs (Transformer Engine's userbuffers ring exchange) splits them
    /// into `t` GEMMs of `T/t` rows each, one per step of the ring.
    pub tp_chunks: u64,
    /// Sequences per micro-batch.
    pub micro_batch: u64,
    /// Tokens per sequence.
    pub seq_len: u64,
    /// Context-parallel degree: this rank holds `s/CP` tokens of each sequence.
    pub cp: u64,
    /// Whether CP gathers every rank's K and V before attention (then the kernel runs this
    /// rank's queries over the whole sequence's keys) rather than passing chunks in a ring
    /// (blocks of `s/CP` by `s/CP`).
    pub cp_gathered: bool,
    /// The precision of the four projections (the head and attention stay BF16).
    pub precision: Precision,
    /// The dense peak the projections run at below BF16, FLOP/s: the brief's FP8 peak for FP8
    /// and MXFP8, its FP4 peak for NVFP4 and MXFP4 ([`Precision::peak_tflops`]); unused in
    /// BF16.
    pub narrow_peak_flops: f64,
    /// The chip's GEMM ceiling in that precision ([`Chip::fp8_ceiling`],
    /// [`Chip::fp4_ceiling`]) times the FP8 recipe's factor ([`Fp8Recipe::gemm_factor`]), 0
    /// in BF16.
    pub narrow_ceiling: f64,
    /// The FP8 recipe, which sets the operands' and the casts' bytes
    /// ([`crate::cost::step::recipe`]); `None`: BF16, or the precision's own bytes.
    pub fp8_recipe: Option<Fp8Recipe>,
    /// Latent attention's up-projections run again in the backward (Megatron-core's
    /// `mla_up_proj` module, [`crate::cost::step::detailed::Options::latent_recompute`]).
    pub latent_recompute: bool,
    /// The GPU multiplies FP8 in any operand layout, so a per-tensor cast writes one FP8 copy,
    /// not a copy and its transpose ([`crate::cost::step::detailed::Options::fp8_any_layout`]).
    pub fp8_any_layout: bool,
}

/// Seconds of one operation, or a group of them, forward and backward.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Op {
    /// Forward seconds.
    pub forward: f64,
    /// Backward seconds.
    pub backward: f64,
}

impl Op {
    fn add(self, o: Op) -> Op {
        Op {
            forward: self.forward + o.forward,
            backward: self.backward + o.backward,
        }
    }

    fn sub(self, o: Op) -> Op {
        Op {
            forward: self.forward - o.forward,
            backward: self.backward - o.backward,
        }
    }
}

/// Bytes a token the MLP's activation moves forward for each of its `f` channels: SwiGLU
/// reads the gate's and the up projection's BF16 outputs and writes their product (`4 + 2`);
/// a non-gated squared ReLU reads one and writes one (`2 + 2`, [`Shape::mlp_inputs`]).
fn activation_bytes(shape: &Shape) -> f64 {
    2.0 * shape.mlp_inputs() as f64 + 2.0
}

/// The chunk an SSD scan splits the sequence into (Megatron-core's `MambaMixer`:
/// `chunk_size = 128`).
pub const SSD_CHUNK: f64 = 128.0;

/// Each kind of a hybrid model's blocks' seconds per micro-batch ([`Context::hybrid_blocks`]);
/// `moe` is `None` without experts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockTimes {
    /// A Mamba-2 block's.
    pub mamba: LayerTime,
    /// An attention block's.
    pub attention: LayerTime,
    /// A dense MLP block's.
    pub mlp: LayerTime,
    /// A mixture-of-experts block's.
    pub moe: Option<LayerTime>,
}

/// One layer's seconds per micro-batch by kind, and what recomputation adds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LayerTime {
    /// The four projections.
    pub gemm: Op,
    /// The attention core.
    pub attention: Op,
    /// Norms, RoPE, SwiGLU, residuals.
    pub elementwise: Op,
    /// Forward work done again in backward.
    pub recompute: f64,
}

impl LayerTime {
    /// This layer less `o`'s operations, kind by kind (a hybrid block as a layer less the
    /// blocks it does not run, [`Context::hybrid_blocks`]).
    fn less(self, o: &LayerTime) -> LayerTime {
        LayerTime {
            gemm: self.gemm.sub(o.gemm),
            attention: self.attention.sub(o.attention),
            elementwise: self.elementwise.sub(o.elementwise),
            recompute: self.recompute - o.recompute,
        }
    }

    /// This layer with `o`'s element-wise work added.
    fn with_elementwise(self, o: Op) -> LayerTime {
        LayerTime {
            elementwise: self.elementwise.add(o),
            ..self
        }
    }

    /// Forward, backward and recomputation together.
    pub fn total(&self) -> f64 {
        let all = self.gemm.add(self.attention).add(self.elementwise);
        all.forward + all.backward + self.recompute
    }

    /// The forward alone.
    pub fn forward(&self) -> f64 {
        self.gemm.forward + self.attention.forward + self.elementwise.forward
    }
}

impl Context<'_> {
    /// Tokens of the micro-batch on this rank, `b·s/CP`.
    fn tokens(&self) -> f64 {
        (self.micro_batch * self.seq_len) as f64 / self.cp.max(1) as f64
    }

    /// Seconds of one `m × n × k` BF16 GEMM.
    pub fn gemm(&self, m: f64, n: f64, k: f64) -> f64 {
        self.gemm_on(m, n, k, f64::from(self.chip.sms))
    }

    /// Seconds of one `m × n × k` BF16 GEMM on `sms` of the SMs.
    fn gemm_on(&self, m: f64, n: f64, k: f64, sms: f64) -> f64 {
        if m * n * k == 0.0 {
            // No product at all (an MoE layer without shared experts has no dense MLP).
            return 0.0;
        }
        let flops = 2.0 * m * n * k;
        let fraction = self.gemm_ceiling * self.chip.shape_fraction_on(m, n, k, sms);
        let rate = self.peak_flops * fraction * self.sustained;
        let bytes = 2.0 * (m * k + k * n + m * n);
        (flops / rate).max(bytes / (self.hbm_bytes_per_second * HBM_EFFICIENCY))
    }

    /// Seconds of one `m × n × k` projection GEMM on `sms` of the SMs in the step's
    /// precision: BF16 as [`Context::gemm_on`], or FP8 (FP4) at the FP8 (FP4) peak times the
    /// chip's ceiling in it and the shape's losses (K blocks [`FP8_BK`] or [`FP4_BK`] deep),
    /// reading the precision's operands ([`Precision::operand_bytes`]) and writing a BF16
    /// result.
    fn matmul_on(&self, m: f64, n: f64, k: f64, sms: f64) -> f64 {
        if !self.precision.is_narrow() || m * n * k == 0.0 {
            return self.gemm_on(m, n, k, sms);
        }
        let flops = 2.0 * m * n * k;
        let bk = if self.precision.is_fp4() {
            FP4_BK
        } else {
            FP8_BK
        };
        let fraction = self.narrow_ceiling * self.chip.shape_fraction_deep(m, n, k, sms, bk);
        let rate = self.narrow_peak_flops * fraction * self.sustained;
        let operand = self
            .fp8_recipe
            .map_or(self.precision.operand_bytes(), Fp8Recipe::operand_bytes);
        let bytes = operand * (m * k + k * n) + 2.0 * m * n;
        (flops / rate).max(bytes / (self.hbm_bytes_per_second * HBM_EFFICIENCY))
    }

    /// [`Context::matmul_on`] on every SM.
    fn matmul(&self, m: f64, n: f64, k: f64) -> f64 {
        self.matmul_on(m, n, k, f64::from(self.chip.sms))
    }

    /// A forward GEMM and its two backward GEMMs.
    fn linear(&self, m: f64, n: f64, k: f64) -> Op {
        Op {
            forward: self.gemm(m, n, k),
            backward: self.gemm(m, k, n) + self.gemm(k, n, m),
        }
    }

    /// A forward GEMM and its two backward GEMMs in the step's precision, on every SM, with
    /// no TP collective beside it: latent attention's down- and up-projections.
    fn dense(&self, m: f64, n: f64, k: f64) -> Op {
        Op {
            forward: self.matmul(m, n, k),
            backward: self.matmul(m, k, n) + self.matmul(k, n, m),
        }
    }

    /// A projection whose TP collective overlaps it: the forward and the input gradient in
    /// [`Context::tp_chunks`] pieces of rows; the weight gradient whole. A projection whose
    /// output is reduce-scattered (`reduces`: the attention output and the down projection)
    /// leaves [`OVERLAP_SMS`] of the SMs to the collective while its chunks run.
    fn projection(&self, m: f64, n: f64, k: f64, reduces: bool) -> Op {
        let c = self.tp_chunks.max(1) as f64;
        let all = f64::from(self.chip.sms);
        let sms = if c > 1.0 && reduces {
            all - OVERLAP_SMS
        } else {
            all
        };
        Op {
            forward: c * self.matmul_on(m / c, n, k, sms),
            backward: c * self.matmul(m / c, k, n) + self.matmul(k, n, m),
        }
    }

    /// Seconds to move `bytes` through HBM.
    fn traffic(&self, bytes: f64) -> f64 {
        bytes / (self.hbm_bytes_per_second * HBM_EFFICIENCY)
    }

    /// The attention core of one layer. Under context parallelism each rank runs `1/CP` of the
    /// causal FLOPs (the load-balanced split gives every rank the same share) on its `s/CP`
    /// queries, at the kernel's throughput for blocks of `s/CP` in a ring, or for the whole
    /// sequence's keys once they are gathered.
    ///
    /// Under a sliding window of `w` tokens a layer's fused kernel runs only the blocks the
    /// window reaches, `w − w²/(2s)` keys a query ([`Shape::attention_sequence`]), each query
    /// block against about `2w` keys of which the diagonal ones are partly masked, as the
    /// causal kernel does on a sequence of `2w`: at the chip's rate there. The mean layer's
    /// time, where some layers are windowed and the others not (gpt-oss's alternation). The
    /// unfused kernels compute every score and mask them: no window changes their work.
    pub fn attention(&self, shape: &Shape) -> Op {
        let t = self.tp as f64;
        let cp = self.cp.max(1) as f64;
        let (b, s) = (self.micro_batch as f64, self.seq_len as f64);
        let q = shape.attention_core_width();
        let kernel_seq = if self.cp_gathered { s } else { s / cp };
        match self.chip.attention_fraction(self.attention, kernel_seq) {
            Some(fraction) => {
                // Seconds of a layer's forward and backward attending to a mean of
                // `keys·s/2` FLOP-keys a query at the kernel's rate for `seq`.
                let time = |keys: f64, fraction: f64| {
                    let forward_flops = 2.0 * b * s * keys * q / (t * cp);
                    3.5 * forward_flops / (self.peak_flops * fraction * self.sustained)
                };
                let all = match shape.windowed(self.seq_len) {
                    None => time(s, fraction),
                    Some((n, w)) => {
                        let w = w as f64;
                        let window_seq = (2.0 * w).min(kernel_seq);
                        let windowed = self
                            .chip
                            .attention_fraction(self.attention, window_seq)
                            .unwrap_or(fraction);
                        let share = f64::from(n) / f64::from(shape.layers);
                        share * time(2.0 * w - w * w / s, windowed)
                            + (1.0 - share) * time(s, fraction)
                    }
                };
                Op {
                    forward: all / 3.5,
                    backward: all * 2.5 / 3.5,
                }
            }
            None => {
                // Batched GEMMs over the `b·a/t` (sequence, head) pairs, whose tiles fill the
                // waves together: QKᵀ and PV forward; dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K and
                // dK = dSᵀ·Q backward; the query-key products `d_qk` deep or wide, the
                // value products `d_v` (the same `d` but for latent attention).
                let a = f64::from(shape.heads);
                let w = shape.attention_widths();
                let (d_qk, d_v) = (w.query / a, w.output / a);
                let products = b * a / t;
                let scores = products * s * s;
                let rows = products * s;
                let scores_of = |d: f64| self.gemm(rows, s, d);
                let thin = |d: f64| self.gemm(rows, d, s);
                Op {
                    forward: scores_of(d_qk) + thin(d_v) + self.traffic(4.0 * scores),
                    backward: scores_of(d_v)
                        + thin(d_v)
                        + 2.0 * thin(d_qk)
                        + self.traffic(6.0 * scores),
                }
            }
        }
    }

    /// Element-wise bytes per token of one layer's forward: (h-wide, split over TP, whole on
    /// every TP rank).
    ///
    /// Latent attention (fused kernels) replaces RoPE on Q and K, `4(q + g)`, by: RoPE on the
    /// queries' and the shared key's RoPE parts, `4(a·d_rope + d_rope)`; the two latent
    /// RMSNorms, read and write `4(r_q + r_kv)`; and assembling each head's Q and K from their
    /// parts and V from the up-projection's output (Megatron-core's `MLASelfAttention` writes
    /// them contiguous for the core), read and write `4(q_qk + k_qk + v)`. The latents' norms
    /// run on the sequence-parallel shard (h-wide's share), the shared RoPE key whole on every
    /// TP rank (gathered), the rest split by heads.
    fn elementwise_bytes(&self, shape: &Shape) -> (f64, f64, f64) {
        let h = shape.hidden as f64;
        let f = shape.ffn as f64;
        let w = shape.attention_widths();
        let (q, g) = (w.query, w.key);
        let act = activation_bytes(shape);
        match (self.elementwise, w.latent) {
            (Kernels::Fused | Kernels::Lean, None) => (20.0 * h, 4.0 * (q + g) + act * f, 0.0),
            (Kernels::Fused | Kernels::Lean, Some(l)) => (
                20.0 * h + 4.0 * (l.q_rank.unwrap_or(0.0) + l.kv_rank),
                4.0 * l.query_rope + 4.0 * (w.query + w.key + w.value) + act * f,
                4.0 * l.rope,
            ),
            (Kernels::Eager, _) => (84.0 * h, 20.0 * (q + g) + 4.0 * q + 4.0 * g + 10.0 * f, 0.0),
        }
    }

    /// The element-wise work of one layer; with [`Kernels::Lean`] backward also recomputes
    /// SwiGLU's product (reads 4f, writes 2f). With FP8 the casts of the projections'
    /// operands ([`Context::cast_bytes`]) are added.
    fn elementwise(&self, shape: &Shape) -> Op {
        let t = self.tp as f64;
        let wide_share = if self.sequence_parallel { t } else { 1.0 };
        let moved = |(wide, split, whole): (f64, f64, f64)| {
            self.traffic(self.tokens() * (wide / wide_share + split / t + whole))
        };
        let forward = moved(self.elementwise_bytes(shape));
        let again = if self.elementwise == Kernels::Lean {
            self.traffic(self.tokens() * 6.0 * shape.ffn as f64 / t)
        } else {
            0.0
        };
        let (cast_forward, cast_backward) = self.cast_bytes(shape);
        Op {
            forward: forward + moved(cast_forward),
            backward: 2.0 * forward + again + moved(cast_backward) + self.hadamard(shape),
        }
    }

    /// Seconds of an FP4 step's Hadamard transform on one layer's weight-gradient operands
    /// ([`Precision::hadamard`] FLOPs an element, at the BF16 GEMM ceiling: a 16 × 16 product
    /// on the tensor cores), 0 in the other precisions. Per token the operands are the
    /// column-parallel projections' inputs, gathered whole (`h` each, QKV and gate/up), the
    /// row-parallel ones' (`q/t`, `f/t`), the output gradients of the column-parallel
    /// projections (`(q + 2g)/t`, `2f/t`) and of the row-parallel ones, gathered whole (`h`
    /// each): `4h + (2q + 2g + 3f)/t`; with latent attention the up-projections' outputs
    /// (`a·d_qk + a·(d_nope + d_v)`) in place of `q + 2g` (its down-projections' small
    /// latents left out).
    fn hadamard(&self, shape: &Shape) -> f64 {
        let t = self.tp as f64;
        let h = shape.hidden as f64;
        let f = shape.ffn as f64;
        let w = shape.attention_widths();
        let up = shape.mlp_inputs() as f64;
        self.hadamard_of(
            self.tokens() * (4.0 * h + (w.output + w.projected() + (up + 1.0) * f) / t),
        )
    }

    /// Seconds of an FP4 step's Hadamard transform on `elements` weight-gradient operands; 0
    /// in the other precisions.
    fn hadamard_of(&self, elements: f64) -> f64 {
        elements * self.precision.hadamard()
            / (self.peak_flops * self.gemm_ceiling * self.sustained)
    }

    /// Bytes per token the FP8 casts of one layer move, (h-wide, split over TP), forward and
    /// backward; nothing in BF16. Forward: the QKV and gate/up inputs, cast inside the
    /// RMSNorms that write them ([`FUSED_CAST_BYTES`] each, `h` wide), and the attention
    /// output and SwiGLU's output cast on their own ([`CAST_BYTES`], `q` and `f` wide).
    /// Backward: each projection's output gradient cast with its transpose: the attention
    /// output's and the down projection's (`h` wide), the QKV's (`q + 2g`) and the gate/up's
    /// (`2f`).
    ///
    /// Latent attention's projections are cast on their own: forward the down-projections'
    /// input (`h`, once for each of the two, Megatron-core's MLA norm being a module of its own,
    /// not fused into a GEMM) and the up-projections' latents (`r_q + r_kv`), all on the
    /// sequence shard; backward the down-projections' output gradient (`r_q + r_kv + d_rope`) and
    /// the up-projections' (`a·d_qk + a·(d_nope + d_v)`) in place of the QKV's.
    fn cast_bytes(&self, shape: &Shape) -> ((f64, f64, f64), (f64, f64, f64)) {
        if !self.precision.is_narrow() {
            return ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0));
        }
        let h = shape.hidden as f64;
        let f = shape.ffn as f64;
        let w = shape.attention_widths();
        let up = shape.mlp_inputs() as f64;
        let any = self.fp8_any_layout;
        let (cast, fused) = self.fp8_recipe.map_or((CAST_BYTES, FUSED_CAST_BYTES), |r| {
            (r.cast_bytes(any), r.fused_cast_bytes(any))
        });
        match w.latent {
            None => (
                (2.0 * fused * h, cast * (w.output + f), 0.0),
                (2.0 * cast * h, cast * (w.projected() + up * f), 0.0),
            ),
            Some(l) => (
                (
                    (fused + 2.0 * cast) * h + cast * (l.q_rank.unwrap_or(0.0) + l.kv_rank),
                    cast * (w.output + f),
                    0.0,
                ),
                (
                    cast * (2.0 * h + l.down()),
                    cast * (w.projected() + up * f),
                    0.0,
                ),
            ),
        }
    }

    /// Latent attention's input projections (DeepSeek-V2 §2.1; Megatron-core's
    /// `MLASelfAttention`): the down-projections `h → r_q + r_kv + d_rope`, run on each rank's
    /// sequence-parallel shard of the tokens (`T/t`; without sequence parallelism every rank
    /// runs them on all `T`, Megatron-core's duplicated linears), then the column-parallel
    /// up-projections on the gathered latents, `r_q → a·d_qk/t` and `r_kv → a·(d_nope +
    /// d_v)/t`. Without a query latent the queries are projected from `h` directly, a
    /// column-parallel projection like grouped-query attention's QKV. None overlaps a TP
    /// collective but that one.
    fn latent_projections(&self, h: f64, l: &LatentWidths, w: &AttentionWidths) -> Op {
        let t = self.tp as f64;
        let tokens = self.tokens();
        let down_tokens = if self.sequence_parallel {
            tokens / t
        } else {
            tokens
        };
        let down = self.dense(down_tokens, l.down(), h);
        let (query, key_value) = self.up_projections(h, l, w);
        down.add(query).add(key_value)
    }

    /// Latent attention's column-parallel up-projections, `r_q → a·d_qk/t` from the gathered
    /// query latent (from `h` where the queries have no latent: Megatron-core's
    /// `qkv_up_proj_and_rope_apply` then projects the layer's input) and `r_kv → a·(d_nope +
    /// d_v)/t`, the queries' and the keys' and values': what Megatron-core's `mla_up_proj`
    /// module runs again in the backward.
    fn up_projections(&self, h: f64, l: &LatentWidths, w: &AttentionWidths) -> (Op, Op) {
        let t = self.tp as f64;
        let tokens = self.tokens();
        let query = match l.q_rank {
            Some(r) => self.dense(tokens, w.query / t, r),
            None => self.projection(tokens, w.query / t, h, false),
        };
        (query, self.dense(tokens, l.kv_up / t, l.kv_rank))
    }

    /// One layer's seconds per micro-batch under `recompute`.
    pub fn layer(&self, shape: &Shape, recompute: Recompute) -> LayerTime {
        let t = self.tp as f64;
        let tokens = self.tokens();
        let h = shape.hidden as f64;
        let f = shape.ffn as f64;
        let w = shape.attention_widths();
        let (q, g) = (w.query, w.key);
        let qkv = match w.latent {
            None => self.projection(tokens, w.projected() / t, h, false),
            Some(l) => self.latent_projections(h, &l, &w),
        };
        let out = self.projection(tokens, h, w.output / t, true);
        let up = shape.mlp_inputs() as f64;
        let gate_up = self.projection(tokens, up * f / t, h, false);
        let down = self.projection(tokens, h, f / t, true);
        let gemm = qkv.add(out).add(gate_up).add(down);
        let attention = self.attention(shape);
        let elementwise = self.elementwise(shape);
        let mut time = LayerTime {
            gemm,
            attention,
            elementwise,
            recompute: 0.0,
        };
        time.recompute = match recompute {
            Recompute::None => 0.0,
            Recompute::Selective => attention.forward,
            Recompute::Full => time.forward(),
            Recompute::SelectiveLayer => time.forward() / 2.0,
            Recompute::SaveQkv => time.forward() - qkv.forward,
            // Every second matrix product of the layer — the K projection, the attention
            // output and the up projection — and all element-wise work; attention is kept.
            Recompute::SelectiveOp => {
                self.matmul(tokens, g / t, h)
                    + self.matmul(tokens, h, q / t)
                    + self.matmul(tokens, f / t, h)
                    + elementwise.forward
            }
        };
        // `mla_up_proj` (with none or selective recomputation, which leave the projections)
        // projects the queries, keys and values again from the kept latents; RoPE's
        // element-wise pass on them is left out.
        if let (true, Some(l)) = (self.latent_recompute, w.latent) {
            let (query, key_value) = self.up_projections(h, &l, &w);
            time.recompute += query.add(key_value).forward;
        }
        time
    }

    /// A grouped GEMM of the rank's `E/EP` experts, each `m_e × n × k` with `m_e` the routes
    /// it runs ([`Routed::per_expert`]): the experts' tiles fill the waves together, each
    /// expert's rows padded to a whole tile of [`GROUP_ROWS`] (Transformer Engine's and
    /// CUTLASS's grouped kernels tile each problem on its own), so it runs as one GEMM of
    /// `(E/EP)·⌈m_e/128⌉·128` rows. Backward: the input gradient the same way, the weight
    /// gradients as `E/EP` products of depth `m_e` side by side.
    fn grouped(&self, r: &Routed, n: f64, k: f64) -> Op {
        let m = r.per_expert();
        let rows = r.local_experts * (m / GROUP_ROWS).ceil() * GROUP_ROWS;
        Op {
            forward: self.matmul(rows, n, k),
            backward: self.matmul(rows, k, n) + self.matmul(r.local_experts * k, n, m),
        }
    }

    /// Seconds of the FP8 casts of the routed experts' GEMM operands, forward and backward
    /// (nothing in BF16), per route as [`Context::cast_bytes`] counts a dense MLP's: forward
    /// the dispatched input (`h`) and SwiGLU's output (`f_e/ETP`), backward the down
    /// projection's output gradient (`h`) and the gate/up's (`2f_e/ETP`). The dispatch and
    /// combine move BF16 (Megatron-core's all-to-all dispatcher; an FP8 dispatch is DeepEP's
    /// option, not modelled).
    fn routed_casts(&self, shape: &Shape, r: &Routed) -> (f64, f64) {
        if !self.precision.is_narrow() {
            return (0.0, 0.0);
        }
        let h = shape.hidden as f64;
        let cast = self
            .fp8_recipe
            .map_or(CAST_BYTES, |r| r.cast_bytes(self.fp8_any_layout));
        (
            self.traffic(r.routes * cast * (h + r.width)),
            self.traffic(r.routes * cast * (h + shape.mlp_inputs() as f64 * r.width)),
        )
    }

    /// One MoE layer's seconds per micro-batch under `recompute` ([`crate::cost::step::experts`]): its
    /// dense part as a dense layer ([`Context::layer`] of [`crate::model::moe_dense_part`]: attention, the
    /// shared experts), the router (`T/t × E × h`, on the sequence-parallel shard), the routed
    /// experts' gate/up (`2f_e/ETP`) and down GEMMs grouped ([`Context::grouped`]), and their
    /// element-wise work: SwiGLU over every route (`6·f_e/ETP` bytes forward), the permutation
    /// into expert order and back (read and write `2h` each way, `8h` a route), the router's
    /// softmax and top-k (`12E` bytes a token). Recomputation repeats the routed forward as it
    /// repeats the dense one (none under selective recomputation, which recomputes attention);
    /// `moe` recomputes it whole, the shared experts with it, and `act` SwiGLU alone
    /// ([`MoeRecompute`]).
    pub fn moe_layer(
        &self,
        shape: &Shape,
        recompute: Recompute,
        moe: MoeRecompute,
        r: &Routed,
    ) -> LayerTime {
        let dense = moe_dense_part(shape);
        let mut time = self.layer(&dense, recompute);
        let dense_forward = time.forward();
        let t = self.tp as f64;
        let h = shape.hidden as f64;
        let tokens = self.tokens() / t;
        let router = self.linear(tokens, r.experts, h);
        let up = shape.mlp_inputs() as f64;
        let act = activation_bytes(shape);
        let experts = self
            .grouped(r, up * r.width, h)
            .add(self.grouped(r, h, r.width));
        let elementwise =
            self.traffic(r.routes * (act * r.width + 8.0 * h) + tokens * 12.0 * r.experts);
        let (cast_forward, cast_backward) = self.routed_casts(shape, r);
        let forward = router.forward + experts.forward + elementwise + cast_forward;
        time.gemm = time.gemm.add(router).add(experts);
        time.elementwise = time.elementwise.add(Op {
            forward: elementwise + cast_forward,
            backward: 2.0 * elementwise + cast_backward,
        });
        time.recompute += match (recompute, moe) {
            (Recompute::Full, _) => forward,
            // `moe` (which goes with none or selective recomputation, neither of which runs
            // the MLP again) checkpoints the shared experts with the routed ones: their
            // forward, the dense part's less attention's, runs again too.
            (_, MoeRecompute::Layer) if r.shared > 0.0 => {
                let attention = self.layer(&without_shared(&dense), Recompute::None);
                forward + dense_forward - attention.forward()
            }
            (_, MoeRecompute::Layer) => forward,
            (Recompute::SelectiveLayer, _) => forward / 2.0,
            (_, MoeRecompute::Act) => self.traffic(r.routes * act * r.width),
            _ => 0.0,
        };
        time
    }

    /// One block's RMSNorm and residual add, the `h`-wide part of a layer's element-wise
    /// work that each hybrid block has once (a layer twice, [`Context::elementwise`]): `10h`
    /// bytes a token forward, twice backward (÷t with sequence parallelism); below BF16 the
    /// norm's output cast inside it forward ([`FUSED_CAST_BYTES`], `h`) and the block's
    /// row-parallel output gradient cast backward (`h`); under FP4 the Hadamard transform of
    /// the block's two `h`-wide weight-gradient operands (its first projection's gathered
    /// input and its last one's gathered output gradient, half of a layer's `4h`).
    fn block_norm(&self, shape: &Shape) -> Op {
        let h = shape.hidden as f64;
        let share = if self.sequence_parallel {
            self.tp as f64
        } else {
            1.0
        };
        let (cast, fused) = if self.precision.is_narrow() {
            let any = self.fp8_any_layout;
            self.fp8_recipe.map_or((CAST_BYTES, FUSED_CAST_BYTES), |r| {
                (r.cast_bytes(any), r.fused_cast_bytes(any))
            })
        } else {
            (0.0, 0.0)
        };
        let bytes = |b: f64| self.traffic(self.tokens() * b * h / share);
        Op {
            forward: bytes(10.0 + fused),
            backward: bytes(20.0 + cast) + self.hadamard_of(self.tokens() * 2.0 * h),
        }
    }

    /// One kernel of `flops` FLOPs at the chip's GEMM figures for an `m × n × k` product
    /// (its tiles' shape), or its `bytes` through HBM if that is longer.
    fn kernel(&self, flops: f64, (m, n, k): (f64, f64, f64), bytes: f64) -> f64 {
        let compute = if flops == 0.0 {
            0.0
        } else {
            let fraction = self.gemm_ceiling
                * self
                    .chip
                    .shape_fraction_on(m, n, k, f64::from(self.chip.sms));
            flops / (self.peak_flops * fraction * self.sustained)
        };
        compute.max(self.traffic(bytes))
    }

    /// The SSD scan of one Mamba-2 block (Dao and Gu 2024, §6 and Listing 1: the chunked
    /// algorithm) as `mamba_ssm`'s `ssd_combined.py`, which Megatron-core's `MambaMixer`
    /// calls, runs it: four kernels over this rank's `H/t` heads and `G/t` groups, the
    /// sequence in `c = T/Q` chunks of `Q` = [`SSD_CHUNK`], each at its products' tile shape
    /// or its reads and writes through HBM ([`Context::kernel`]):
    /// - `_bmm_chunk_fwd`, `C·Bᵀ` in each chunk and group: `2·c·G·Q²·N` FLOPs; reads B and C
    ///   (`4·G·N` bytes a token), writes the `Q × Q` scores (`2·G·Q`);
    /// - `_chunk_state_fwd`, each chunk's state `Bᵀ·X`: `2·c·H·N·P·Q`; reads B and X
    ///   (`2·G·N + 2·H·P`), writes the FP32 states (`4·H·P·N` a chunk);
    /// - `_state_passing_fwd`: reads and writes the states;
    /// - `_chunk_scan_fwd`, the masked scores times X and C times the passed state:
    ///   `2·c·H·Q·P·(Q + N)`; reads the scores, C, X and the states, writes `y` (`2·H·P`).
    ///
    /// Backward runs each kernel's two gradient products and its traffic twice over.
    /// Nemotron 3 Nano (`H = 64, P = 64, N = 128, G = 8`): 3.4 MFLOP a token forward, beside
    /// Megatron-LM's estimate `7·d_in·N` = 3.7, and about 100 kB a token of traffic, which
    /// binds.
    fn ssd_scan(&self, m: &crate::model::hybrid::Mamba) -> Op {
        let t = self.tp as f64;
        let heads = f64::from(m.heads) / t;
        let groups = f64::from(m.groups) / t;
        let (p, n, q) = (m.head_dim as f64, m.state as f64, SSD_CHUNK);
        let tokens = self.tokens();
        // Each sequence of the micro-batch in its own chunks (CP is 1 for a hybrid).
        let chunks = self.micro_batch as f64 * (self.seq_len as f64 / q).ceil();
        let states = 4.0 * chunks * heads * p * n;
        let scores = self.kernel(
            2.0 * chunks * groups * q * q * n,
            (chunks * groups * q, q, n),
            tokens * (4.0 * groups * n + 2.0 * groups * q),
        );
        let chunk_states = self.kernel(
            2.0 * chunks * heads * n * p * q,
            (chunks * heads * n, p, q),
            tokens * (2.0 * groups * n + 2.0 * heads * p) + states,
        );
        let passing = self.traffic(2.0 * states);
        let scan = self.kernel(
            2.0 * chunks * heads * q * p * (q + n),
            (chunks * heads * q, p, q + n),
            tokens * (2.0 * groups * q + 2.0 * groups * n + 4.0 * heads * p) + states,
        );
        let forward = scores + chunk_states + passing + scan;
        Op {
            forward,
            backward: 2.0 * forward,
        }
    }

    /// One Mamba-2 block's seconds per micro-batch, its recomputation left to
    /// [`Context::hybrid_blocks`] (Megatron-core's `MambaMixer` under Transformer Engine):
    /// - `in_proj`, column-parallel with the norm fused (`LayerNormColumnParallelLinear`):
    ///   `(T, (2·d_in + 2·G·N + H)/t, h)`; `out_proj`, row-parallel: `(T, h, d_in/t)`; both in
    ///   the step's precision, overlapping their TP collectives as a layer's projections do;
    /// - the SSD scan ([`Context::ssd_scan`]), in the slot of attention's core;
    /// - element-wise: the block's norm and residual ([`Context::block_norm`]); the depthwise
    ///   convolution reads and writes `x`, `B` and `C` (`4·(d_in + 2·G·N)` bytes a token), the
    ///   gated RMSNorm reads `y` and `z` and writes its output (`6·d_in`), all ÷t, twice that
    ///   backward; below BF16 `out_proj`'s input cast forward (`d_in`) and `in_proj`'s output
    ///   gradient backward (`2·d_in + 2·G·N + H`), and under FP4 the Hadamard transform of the
    ///   two projections' split weight-gradient operands (`(2·d_in + 2·G·N + H + d_in)/t`; the
    ///   `h`-wide ones with the norm's).
    pub fn mamba_block(&self, shape: &Shape, m: &crate::model::hybrid::Mamba) -> LayerTime {
        let t = self.tp as f64;
        let tokens = self.tokens();
        let h = shape.hidden as f64;
        let (d_in, projected) = (m.inner() as f64, m.projected() as f64);
        let conv = m.conv_channels() as f64;
        let in_proj = self.projection(tokens, projected / t, h, false);
        let out_proj = self.projection(tokens, h, d_in / t, true);
        let cast = if self.precision.is_narrow() {
            self.fp8_recipe
                .map_or(CAST_BYTES, |r| r.cast_bytes(self.fp8_any_layout))
        } else {
            0.0
        };
        let moved = 4.0 * conv + 6.0 * d_in;
        let norm = self.block_norm(shape);
        let elementwise = Op {
            forward: norm.forward + self.traffic(tokens * (moved + cast * d_in) / t),
            backward: norm.backward
                + self.traffic(tokens * (2.0 * moved + cast * projected) / t)
                + self.hadamard_of(tokens * (projected + d_in) / t),
        };
        LayerTime {
            gemm: in_proj.add(out_proj),
            attention: self.ssd_scan(m),
            elementwise,
            recompute: 0.0,
        }
    }

    /// The seconds per micro-batch of each kind of a hybrid model's blocks
    /// ([`crate::model::hybrid`]), each one norm and one mixer or MLP:
    /// - `*`: a layer of attention alone ([`crate::model::without_shared`]) less one block's
    ///   norm ([`Context::block_norm`]), which that layer counts for its absent MLP;
    /// - `-`: a layer of the shape's MLP less that attention layer, plus its norm;
    /// - `E`: an MoE layer ([`Context::moe_layer`], with `moe`'s recomputation) less that
    ///   attention layer, plus its norm;
    /// - `M`: [`Context::mamba_block`].
    ///
    /// Recomputation, a layer's rules by block: `full` runs each block's forward again,
    /// `selective-layer` half of it, `selective` the attention core of an attention block,
    /// and `moe` recomputation what it runs in an MoE layer.
    pub fn hybrid_blocks(
        &self,
        shape: &Shape,
        recompute: Recompute,
        moe: MoeRecompute,
        routed: Option<&Routed>,
    ) -> Option<BlockTimes> {
        let hybrid = shape.hybrid.as_ref()?;
        let attention_only = without_shared(&moe_dense_part(shape));
        let a = self.layer(&attention_only, Recompute::None);
        let norm = self.block_norm(shape);
        let less_norm = Op {
            forward: -norm.forward,
            backward: -norm.backward,
        };
        let mlp_shape = Shape {
            experts: None,
            ..shape.clone()
        };
        let again = |mut b: LayerTime, core: bool| {
            b.recompute += match recompute {
                Recompute::Full => b.forward(),
                Recompute::SelectiveLayer => b.forward() / 2.0,
                Recompute::Selective if core => b.attention.forward,
                _ => 0.0,
            };
            b
        };
        Some(BlockTimes {
            mamba: again(self.mamba_block(shape, &hybrid.mamba), false),
            attention: again(a.with_elementwise(less_norm), true),
            mlp: again(
                self.layer(&mlp_shape, Recompute::None)
                    .less(&a)
                    .with_elementwise(norm),
                false,
            ),
            moe: routed.map(|r| {
                let b = self
                    .moe_layer(shape, Recompute::None, moe, r)
                    .less(&a)
                    .with_elementwise(norm);
                // `moe` recomputation's share stays; full recomputation replaces it.
                match recompute {
                    Recompute::Full | Recompute::SelectiveLayer => again(
                        LayerTime {
                            recompute: 0.0,
                            ..b
                        },
                        false,
                    ),
                    _ => b,
                }
            }),
        })
    }

    /// The output head and the loss, per micro-batch on the last stage; and for each
    /// multi-token-prediction depth ([`Shape::mtp`]) the head and loss again and its `2h → h`
    /// projection (column-parallel, Megatron-core's `eh_proj`; its layer is costed as a layer).
    pub fn head(&self, shape: &Shape) -> Op {
        let t = self.tp as f64;
        let tokens = self.tokens();
        let v = shape.vocab as f64;
        let h = shape.hidden as f64;
        let gemm = self.linear(tokens, v / t, h);
        let loss = self.traffic(tokens * v / t * self.loss.bytes_per_logit());
        let one = Op {
            forward: gemm.forward + loss / 2.0,
            backward: gemm.backward + loss / 2.0,
        };
        if shape.mtp == 0 {
            return one;
        }
        let d = f64::from(shape.mtp);
        let projection = self.linear(tokens, h / t, 2.0 * h);
        Op {
            forward: (1.0 + d) * one.forward + d * projection.forward,
            backward: (1.0 + d) * one.backward + d * projection.backward,
        }
    }
}

/// One stage's compute per micro-batch: (all of it, its forward, its GEMMs), seconds.
pub type StageCompute = (f64, f64, f64);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::preset;

    fn context(tp: u64, attention: Attention, elementwise: Kernels) -> Context<'static> {
        let chip = Chip::of(989.0, 3350.0).unwrap();
        Context {
            chip,
            gemm_ceiling: chip.gemm_ceiling(),
            peak_flops: 989e12,
            hbm_bytes_per_second: 3350e9,
            sustained: 1.0,
            elementwise,
            attention,
            loss: LossKernel::Fused,
            tp,
            sequence_parallel: tp > 1,
            tp_chunks: 1,
            micro_batch: 1,
            seq_len: 8192,
            cp: 1,
            cp_gathered: false,
            precision: Precision::Bf16,
            narrow_peak_flops: 1979e12,
            narrow_ceiling: chip.fp8_ceiling().unwrap(),
            fp8_recipe: None,
            latent_recompute: false,
            fp8_any_layout: false,
        }
    }

    /// A small Nemotron-H-like hybrid: Nemotron-H 8B's widths (h 4,096, 128 Mamba-2 heads of
    /// 64, 8 groups, state 128; squared-ReLU MLPs of 21,504) over one block of each kind
    /// but experts, or (`moe`) with Nemotron 3 Nano's experts on an `E` block.
    fn hybrid(moe: bool) -> Shape {
        let experts = if moe {
            r#","experts":{"routed":128,"per_token":6,"ffn":1856,"shared_ffn":3712,"layers":{"first":3,"step":1}}"#
        } else {
            ""
        };
        let pattern = if moe { "M*-E" } else { "M*-M" };
        serde_json::from_str(&format!(
            r#"{{"name":"hybrid","layers":4,"hidden":4096,"ffn":21504,"heads":32,"kv_heads":8,
            "vocab":131072,"hybrid":{{"pattern":"{pattern}","mamba":{{"heads":128,"head_dim":64,
            "groups":8,"state":128,"conv_kernel":4}}}}{experts}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn an_attention_and_an_mlp_block_run_what_a_layer_runs() {
        // A layer is an attention block and an MLP block: their seconds add up to the
        // layer's (one norm each where the layer has two), whatever the recomputation.
        let shape = hybrid(false);
        let c = context(2, Attention::Cudnn, Kernels::Fused);
        let dense = Shape {
            hybrid: None,
            ..shape.clone()
        };
        for recompute in [Recompute::None, Recompute::Selective, Recompute::Full] {
            let b = c
                .hybrid_blocks(&shape, recompute, MoeRecompute::None, None)
                .unwrap();
            let layer = c.layer(&shape, recompute);
            let sum = b.attention.total() + b.mlp.total();
            assert!(
                (sum - layer.total()).abs() < 1e-12 * layer.total(),
                "{recompute:?}"
            );
            // A squared-ReLU MLP has one input projection: its GEMMs are two thirds of a
            // SwiGLU MLP's of the same width (Nemotron-H's `2·h·f`).
            let swiglu = c.layer(&dense, recompute).gemm.forward;
            let attention = b.attention.gemm.forward;
            let ratio = (layer.gemm.forward - attention) / (swiglu - attention);
            assert!((ratio - 2.0 / 3.0).abs() < 0.02, "{ratio}");
            assert_eq!(b.mlp.attention, Op::default());
        }
    }

    #[test]
    fn an_moe_block_runs_an_moe_layer_less_its_attention() {
        let shape = hybrid(true);
        let c = context(1, Attention::Cudnn, Kernels::Fused);
        // Eight of the 128 experts on this rank, 6 routes a token.
        let sent = 8192.0 * 6.0;
        let r = Routed {
            routes: sent,
            sent,
            local_experts: 8.0,
            width: 1_856.0,
            shared: 3_712.0,
            experts: 128.0,
            per_token: 6.0,
            groups: None,
        };
        let b = c
            .hybrid_blocks(&shape, Recompute::None, MoeRecompute::None, Some(&r))
            .unwrap();
        let moe = c.moe_layer(&shape, Recompute::None, MoeRecompute::None, &r);
        let sum = b.attention.total() + b.moe.unwrap().total();
        assert!((sum - moe.total()).abs() < 1e-12 * moe.total());
    }

    #[test]
    fn a_mamba_block_runs_its_two_projections_and_the_chunked_scan() {
        // Nemotron-H 8B's mixer at TP 1, 8,192 tokens: in_proj 4,096 → 2·8,192 + 2·8·128 +
        // 128 = 18,560 and out_proj 8,192 → 4,096 as a layer's projections run; the scan's
        // products, 2·128·128·8 + 3·2·128·64·128 = 6,553,600 FLOPs a token forward, 3 % of
        // the projections' 2·4,096·(18,560 + 8,192), are bound by their ~190 kB a token of
        // traffic: far longer than at the GEMM ceiling, and under half the projections'.
        let shape = hybrid(false);
        let m = shape.hybrid.as_ref().unwrap().mamba;
        let c = context(1, Attention::Cudnn, Kernels::Fused);
        let b = c.mamba_block(&shape, &m);
        let t = 8192.0;
        let projections = c
            .projection(t, 18_560.0, 4_096.0, false)
            .add(c.projection(t, 4_096.0, 8_192.0, true));
        assert_eq!(b.gemm, projections);
        let scan_flops = 6_553_600.0 * t;
        let at_ceiling = scan_flops / (989e12 * c.gemm_ceiling);
        assert!(b.attention.forward > at_ceiling, "{}", b.attention.forward);
        assert!(b.attention.forward < 0.5 * projections.forward);
        assert_eq!(b.attention.backward, 2.0 * b.attention.forward);
        // Split over TP 2, each rank runs half the heads: the scan takes about half.
        let half = context(2, Attention::Cudnn, Kernels::Fused).mamba_block(&shape, &m);
        let ratio = half.attention.forward / b.attention.forward;
        assert!((0.45..=0.6).contains(&ratio), "{ratio}");
    }

    #[test]
    fn moe_recomputation_runs_all_but_the_attention_block_again() {
        // Megatron-core's `moe` module checkpoints the MoE layer from its normalised input:
        // full recomputation runs the layer's forward again, `moe` all of it but the attention
        // block (and the pre-MLP norm), the shared experts included; so the two differ by the
        // attention block alone, whether or not the layer has shared experts.
        let c = context(1, Attention::Cudnn, Kernels::Fused);
        let attention_block = |shared: u64| {
            let mut shape = preset("8b").unwrap();
            let mut experts = crate::model::Experts::plain(8, 2, 14_336);
            experts.shared_ffn = shared;
            shape.experts = Some(experts);
            let r = Routed {
                routes: 16_384.0,
                sent: 16_384.0,
                local_experts: 8.0,
                width: 14_336.0,
                shared: shared as f64,
                experts: 8.0,
                per_token: 2.0,
                groups: None,
            };
            let full = c.moe_layer(&shape, Recompute::Full, MoeRecompute::None, &r);
            let moe = c.moe_layer(&shape, Recompute::None, MoeRecompute::Layer, &r);
            // Nothing else differs between the two.
            assert_eq!(full.forward(), moe.forward());
            full.recompute - moe.recompute
        };
        let mut attention = preset("8b").unwrap();
        attention.ffn = 0;
        let want = c.layer(&attention, Recompute::None).forward();
        for shared in [0, 5632] {
            let got = attention_block(shared);
            assert!((got - want).abs() < 1e-15, "{shared}: {got} {want}");
        }
    }

    #[test]
    fn fp8_experts_cast_each_route_s_operands() {
        // 16,384 routes of an expert of 14,336 (h 4,096): forward each route's dispatched input
        // and SwiGLU output cast, 4 bytes an element (read 2, write the FP8 value and its
        // transpose): 16,384 · 4 · 18,432 bytes; backward the two output gradients, 16,384 · 4 ·
        // (4,096 + 28,672); at the element-wise share of the H100's 3.35 TB/s. Nothing in BF16.
        let mut shape = preset("8b").unwrap();
        shape.experts = Some(crate::model::Experts::plain(8, 2, 14_336));
        let r = Routed {
            routes: 16_384.0,
            sent: 16_384.0,
            local_experts: 8.0,
            width: 14_336.0,
            shared: 0.0,
            experts: 8.0,
            per_token: 2.0,
            groups: None,
        };
        let mut c = context(1, Attention::Cudnn, Kernels::Fused);
        assert_eq!(c.routed_casts(&shape, &r), (0.0, 0.0));
        c.precision = Precision::Fp8;
        let rate = 3350e9 * HBM_EFFICIENCY;
        let (forward, backward) = c.routed_casts(&shape, &r);
        assert!((forward - 16_384.0 * 4.0 * 18_432.0 / rate).abs() < 1e-15);
        assert!((backward - 16_384.0 * 4.0 * 32_768.0 / rate).abs() < 1e-15);
    }

    #[test]
    fn latent_attention_runs_its_four_projections_and_a_wider_core() {
        // DeepSeek-V3's attention at TP 4, s = 8,192: the down-projections
        // 7,168 → 1,536 + 512 + 64 on each rank's 2,048 tokens under sequence parallelism (all
        // 8,192 without it), the up-projections 1,536 → 128·192/4 and 512 → 128·256/4 on all
        // 8,192, the output 128·128/4 → 7,168; the MLP as any other.
        let shape = crate::model::testing::latent(1);
        let mut c = context(4, Attention::Cudnn, Kernels::Fused);
        let dense = |c: &Context, m: f64, n: f64, k: f64| {
            c.gemm(m, n, k) + c.gemm(m, k, n) + c.gemm(k, n, m)
        };
        let (t, h, f) = (8_192.0, 7_168.0, 18_432.0);
        let attention_gemms = |c: &Context, down_tokens: f64| {
            dense(c, down_tokens, 2_112.0, h)
                + dense(c, t, 6_144.0, 1_536.0)
                + dense(c, t, 8_192.0, 512.0)
                + dense(c, t, h, 4_096.0)
        };
        let mlp = dense(&c, t, 2.0 * f / 4.0, h) + dense(&c, t, h, f / 4.0);
        let layer = c.layer(&shape, Recompute::None);
        let got = layer.gemm.forward + layer.gemm.backward;
        let want = attention_gemms(&c, t / 4.0) + mlp;
        assert!((got - want).abs() < 1e-12 * want, "{got} {want}");
        c.sequence_parallel = false;
        let layer = c.layer(&shape, Recompute::None);
        let got = layer.gemm.forward + layer.gemm.backward;
        let want = attention_gemms(&c, t) + mlp;
        assert!((got - want).abs() < 1e-12 * want, "{got} {want}");
        // The core runs s·(q + o)/t causal FLOPs a token forward, q = 128·192 and o = 128·128:
        // 8,192 · 40,960 / 4 a token, at cuDNN's 8,192-token rate; backward 2.5 times that.
        let rate = 989e12
            * c.chip
                .attention_fraction(Attention::Cudnn, 8_192.0)
                .unwrap();
        let flops = t * t * 40_960.0 / 4.0;
        assert!((layer.attention.forward - flops / rate).abs() < 1e-12);
        assert!((layer.attention.backward - 2.5 * flops / rate).abs() < 1e-12);
        // `mla_up_proj` runs the two up-projections' forward again, and nothing else.
        let up = c.gemm(t, 6_144.0, 1_536.0) + c.gemm(t, 8_192.0, 512.0);
        for recompute in [Recompute::None, Recompute::Selective] {
            let kept = c.layer(&shape, recompute);
            let again = Context {
                latent_recompute: true,
                ..c
            }
            .layer(&shape, recompute);
            let more = again.recompute - kept.recompute;
            assert!((more - up).abs() < 1e-12 * up, "{recompute:?}: {more} {up}");
        }
        // Without a query latent (DeepSeek-V2-Lite's kind) the queries are projected from the
        // layer's input again: h → 128·192/4.
        let mut direct = shape.clone();
        direct.attention.latent.as_mut().unwrap().q_rank = None;
        let up = c.projection(t, 6_144.0, h, false).forward + c.gemm(t, 8_192.0, 512.0);
        let again = Context {
            latent_recompute: true,
            ..c
        };
        let more = again.layer(&direct, Recompute::None).recompute
            - c.layer(&direct, Recompute::None).recompute;
        assert!((more - up).abs() < 1e-12 * up, "{more} {up}");
    }

    #[test]
    fn a_large_gemm_runs_at_the_ceiling_times_its_waves() {
        // 8192 × 28672 × 8192 on an H100: 64 × 112 = 7,168 tiles of 128 × 256 in 55 waves of
        // 132 (7,260); four stages, so the main loop runs 8192/8576 of the time. The ceiling is
        // MAMF's 794.5 over 8192³'s own losses (2048/2112 × 8192/8576).
        let c = context(1, Attention::Cudnn, Kernels::Fused);
        let ceiling = 794.5 / 989.0 / (2048.0 / 2112.0 * 8192.0 / 8576.0);
        assert!((c.gemm_ceiling - ceiling).abs() < 1e-12);
        let fraction = ceiling * 7168.0 / 7260.0 * 8192.0 / 8576.0;
        let want = 2.0 * 8192.0 * 28672.0 * 8192.0 / (989e12 * fraction);
        assert!((c.gemm(8192.0, 28672.0, 8192.0) - want).abs() < 1e-15);
    }

    #[test]
    fn a_thin_gemm_is_bound_by_memory() {
        // 8192 × 8192 × 16: 2.1 GFLOP but 268 MB of output.
        let c = context(1, Attention::Cudnn, Kernels::Fused);
        let bytes = 2.0 * (8192.0 * 16.0 * 2.0 + 8192.0 * 8192.0);
        assert_eq!(c.gemm(8192.0, 8192.0, 16.0), bytes / (3350e9 * 0.6));
    }

    #[test]
    fn flash_attention_of_the_70b_worked_by_hand() {
        // 64 heads × 128 = 8192 wide, s = 8192, TP 1: forward 2·8192²·8192 = 1.0995e12 FLOPs;
        // with the backward 3.5× at cuDNN's 521 TFLOP/s: 7.386 ms, 2/7 of it forward.
        let c = context(1, Attention::Cudnn, Kernels::Fused);
        let s = preset("70b").unwrap();
        let a = c.attention(&s);
        let all = 3.5 * 2.0 * 8192.0f64.powi(3) / 521e12;
        assert!((a.forward + a.backward - all).abs() < 1e-12);
        assert!((a.forward - all / 3.5).abs() < 1e-12);
    }

    #[test]
    fn a_sliding_window_runs_the_blocks_it_reaches_at_the_rate_of_twice_its_length() {
        // Llama 3 8B (32 heads × 128 = 4,096 wide) with a 1,024-token window on every layer at
        // s = 8,192: 2·8,192·(2,048 − 1,024²/8,192)·4,096 forward FLOPs, 3.5× with backward,
        // at cuDNN's rate for a sequence of 2,048.
        let c = context(1, Attention::Cudnn, Kernels::Fused);
        let mut s = preset("8b").unwrap();
        s.architecture.sliding_window = Some(1_024);
        let a = c.attention(&s);
        let rate = c
            .chip
            .attention_fraction(Attention::Cudnn, 2_048.0)
            .unwrap()
            * 989e12;
        let all = 3.5 * 2.0 * 8_192.0 * 1_920.0 * 4_096.0 / rate;
        assert!((a.forward + a.backward - all).abs() < 1e-12);
        // Half the layers windowed: the mean of the two layers' times.
        let full = c.attention(&preset("8b").unwrap());
        s.architecture.window_layers = Some(crate::model::LayerSet::Every { first: 0, step: 2 });
        let half = c.attention(&s);
        let mean = (all + full.forward + full.backward) / 2.0;
        assert!((half.forward + half.backward - mean).abs() < 1e-12);
        // The unfused kernels compute every score whatever the window.
        let unfused = context(1, Attention::Unfused, Kernels::Fused);
        assert_eq!(
            unfused.attention(&s),
            unfused.attention(&preset("8b").unwrap())
        );
    }

    #[test]
    fn recomputation_adds_what_it_says() {
        let c = context(8, Attention::Cudnn, Kernels::Fused);
        let s = preset("70b").unwrap();
        let none = c.layer(&s, Recompute::None);
        let full = c.layer(&s, Recompute::Full);
        assert_eq!(none.recompute, 0.0);
        assert_eq!(full.recompute, none.forward());
        let sel = c.layer(&s, Recompute::Selective);
        assert_eq!(sel.recompute, none.attention.forward);
        let layer = c.layer(&s, Recompute::SelectiveLayer);
        assert_eq!(layer.recompute, full.recompute / 2.0);
        let op = c.layer(&s, Recompute::SelectiveOp);
        assert!(op.recompute > sel.recompute && op.recompute < full.recompute);
    }

    #[test]
    fn eager_element_wise_work_costs_more_than_fused() {
        let s = preset("8b").unwrap();
        let fused = context(1, Attention::Flash2, Kernels::Fused).layer(&s, Recompute::None);
        let eager = context(1, Attention::Flash2, Kernels::Eager).layer(&s, Recompute::None);
        assert!(eager.elementwise.forward > 3.0 * fused.elementwise.forward);
        assert_eq!(eager.gemm, fused.gemm);
        // The fused forward by hand: 8192 tokens × (20·4096 + 4·(4096 + 1024) + 6·14336) bytes.
        let bytes = 8192.0 * (20.0 * 4096.0 + 4.0 * 5120.0 + 6.0 * 14336.0);
        assert!((fused.elementwise.forward - bytes / (3350e9 * 0.6)).abs() < 1e-15);
    }

    #[test]
    fn unfused_attention_is_one_batched_gemm_over_the_heads_worked_by_hand() {
        // GPT-3 175B at TP 8 on an A100: 96/8 = 12 heads of d = 128, s = 2048, b = 1, so the
        // batched QKᵀ is 12·2048 = 24,576 rows × 2048 × 128 and PV 24,576 × 128 × 2048; the
        // scores, 12 × 2048², move 4 bytes each forward and 6 backward.
        let a100 = Chip::of(312.0, 2039.0).unwrap();
        let c = Context {
            chip: a100,
            gemm_ceiling: a100.gemm_ceiling(),
            peak_flops: 312e12,
            hbm_bytes_per_second: 2039e9,
            sustained: 1.0,
            elementwise: Kernels::Fused,
            attention: Attention::Unfused,
            loss: LossKernel::Fused,
            tp: 8,
            sequence_parallel: false,
            tp_chunks: 1,
            micro_batch: 1,
            seq_len: 2048,
            cp: 1,
            cp_gathered: false,
            precision: Precision::Bf16,
            narrow_peak_flops: 0.0,
            narrow_ceiling: 0.0,
            fp8_recipe: None,
            latent_recompute: false,
            fp8_any_layout: false,
        };
        let s = Shape::new("gpt3", 96, 12_288, 32_768, 96, 96, 51_200).unwrap();
        let a = c.attention(&s);
        let (square, thin) = (
            c.gemm(24_576.0, 2048.0, 128.0),
            c.gemm(24_576.0, 128.0, 2048.0),
        );
        let scores = 12.0 * 2048.0 * 2048.0;
        let traffic = |bytes: f64| bytes * scores / (2039e9 * 0.6);
        assert!((a.forward - (square + thin + traffic(4.0))).abs() < 1e-15);
        assert!((a.backward - (square + 3.0 * thin + traffic(6.0))).abs() < 1e-15);
    }

    #[test]
    fn tp_overlap_runs_the_projections_in_chunks_and_lends_sms_to_the_reduce_scatter() {
        // TP 4, 2,048 tokens: the attention output's forward runs as 4 GEMMs of 512 rows on
        // 132 − 24 SMs; its weight gradient stays whole.
        let mut c = context(4, Attention::Cudnn, Kernels::Fused);
        c.seq_len = 2048;
        c.tp_chunks = 4;
        let (m, n, k) = (2048.0, 12_288.0, 3072.0);
        let op = c.projection(m, n, k, true);
        assert!((op.forward - 4.0 * c.gemm_on(512.0, n, k, 108.0)).abs() < 1e-15);
        let back = 4.0 * c.gemm(512.0, k, n) + c.gemm(k, n, m);
        assert!((op.backward - back).abs() < 1e-15);
        assert!(op.forward > c.gemm(m, n, k));
    }
}
