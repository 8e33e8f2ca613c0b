//! Activation memory of one transformer layer, derived tensor by tensor.
//!
//! A layer keeps, from its forward pass to its backward pass, the tensors its backward needs.
//! Each is listed below per token of one sequence (micro-batch b = 1) in bytes, with how it is
//! split under tensor parallelism t: a *tensor-split* tensor lives on one TP rank in 1/t (its
//! heads or its FFN columns); a *replicated* one is whole on every rank, unless sequence
//! parallelism splits it along the sequence, 1/t again (Korthikanti et al., "Reducing Activation
//! Recomputation in Large Transformer Models", arXiv:2205.05198, §4.2). Multiply by `s·b` for a
//! micro-batch. `h` hidden size, `f` FFN width, `a` heads, `g = kv·d` the width of K and V.
//!
//! ## Llama with fused kernels ([`Kernels::Fused`], the default)
//! FlashAttention (Dao 2022) never stores the `s × s` attention matrix: it keeps Q, K, V, the
//! output O and one FP32 log-sum-exp per head and token. RMSNorm (Zhang and Sennrich 2019) is
//! fused and keeps its BF16 input (the per-token FP32 rstd is negligible); RoPE is applied in
//! place, so the rotated Q and K are what attention keeps; SwiGLU keeps its two inputs.
//! Llama has no dropout, hence no masks.
//!
//! | tensor | bytes / token | split |
//! |---|---|---|
//! | attention RMSNorm input | 2h | replicated |
//! | QKV input (RMSNorm output) | 2h | replicated |
//! | Q after RoPE | 2h | tensor |
//! | K after RoPE, V (grouped-query: kv heads only) | 2g + 2g | tensor |
//! | attention output O (also the output projection's input) | 2h | tensor |
//! | softmax log-sum-exp, FP32 | 4a | tensor, attention core |
//! | MLP RMSNorm input | 2h | replicated |
//! | gate/up input (RMSNorm output) | 2h | replicated |
//! | gate and up outputs (SwiGLU's inputs) | 2f + 2f | tensor |
//! | SwiGLU output (down projection's input) | 2f | tensor |
//!
//! In all `8h` replicated and `4h + 4g + 6f + 4a` tensor-split bytes per token.
//!
//! **Where Llama differs from Korthikanti's GPT layer.** Their `34·s·b·h` (Table 2) is for a GPT
//! layer with a 4h GELU MLP, multi-head attention and dropout: `10h` replicated (two LayerNorm
//! inputs, two matmul inputs, two 1-byte dropout masks) and `24h` split (Q, K, V 6h, output
//! projection input 2h, GELU input 8h, its output 8h), plus `5·a·s` bytes of softmax, dropout
//! mask and dropout output. For Llama: no dropout masks (−2h replicated); grouped-query K and V
//! are `4g` instead of `4h` (70B: 0.5h, −3.5h); FlashAttention drops the `5·a·s` term for a
//! `4a` log-sum-exp; and the SwiGLU MLP keeps `6f` where the GELU MLP keeps `16h` (8h + 8h):
//! with f = 3.5h (8B, 70B) 21h, +5h. For 70B: 34 − 2 − 3.5 + 5 + 0.03 = 33.53h. Net, bytes per
//! token without recomputation, replicated + split:
//!
//! | layer | replicated | tensor-split | total at t = 1 |
//! |---|---|---|---|
//! | GPT, 4h GELU MLP (Korthikanti) | 10h | 24h + 5as | 34h + 5as |
//! | Llama 3 8B (g = h/4, f = 3.5h) | 8h | 26.03h | 34.03h |
//! | Llama 3 70B (g = h/8, f = 3.5h) | 8h | 25.53h | 33.53h |
//! | Llama 3 405B (g = h/16, f = 3.25h) | 8h | 23.78h | 31.78h |
//!
//! So the totals are within 7 % of 34h, by coincidence: SwiGLU's larger MLP is paid for by
//! grouped-query attention, FlashAttention and the missing dropout. Under tensor parallelism the
//! difference shows: the split part is 8.5 % (8B) and 6.4 % (70B) larger than GPT's 24h and 1 %
//! smaller for 405B, the replicated part 20 % smaller than 10h.
//!
//! ## Multi-head latent attention (DeepSeek-V2 and V3, fused kernels)
//! Megatron-core's `MLASelfAttention` with Transformer Engine: the attention RMSNorm is a
//! module of its own whose output both down-projections read; the latents `r_q` and `r_kv`
//! stay on the sequence-parallel shard, where their norms run, and the column-parallel
//! up-projections gather them inside the linear (keeping the shard, gathered again in
//! backward), as any column-parallel projection does its input; only the shared RoPE key,
//! `d_rope` wide, is gathered whole. The up-projections write each head's queries, keys and
//! values, `d_qk = d_nope + d_rope` and `d_v` wide, which the core keeps. In place of
//! grouped-query attention's rows:
//!
//! | tensor | bytes / token | split |
//! |---|---|---|
//! | attention RMSNorm input; its output, the down-projections' input | 2h + 2h | replicated |
//! | the latents' RMSNorm inputs | 2r_q + 2r_kv | replicated |
//! | the up-projections' inputs (the normalised latents) | 2r_q + 2r_kv (1 byte an element in FP8) | replicated |
//! | the shared RoPE key | 2d_rope | whole |
//! | Q, K (each head's, the shared RoPE key repeated), V | 2a·d_qk + 2a·d_qk + 2a·d_v | tensor |
//! | attention output O | 2a·d_v | tensor |
//!
//! DeepSeek-V3 (h 7,168, a 128, d_qk 192, d_v 128, r_q 1,536, r_kv 512, d_rope 64): before the
//! MLP 4h + 8,192 replicated, 128 whole and 163,840 + 512 split per token (the split part
//! 22.9h; Llama 3 70B's attention keeps 4h + 4g + 4a, 4.5h): 128 heads of 192-wide queries and
//! keys and 128-wide values.
//!
//! ## Llama in eager PyTorch ([`Kernels::Eager`])
//! The layer `data/calibration/measure_layers.py` measured: RMSNorm in FP32 (it keeps the FP32
//! upcast 4h and the BF16 normalised 2h, and the next layer keeps the 2h output), RoPE unfused (the
//! pre-rotation Q and K stay alive through the slices RoPE saves), K and V repeated to every head
//! before `scaled_dot_product_attention`, and SwiGLU unfused (SiLU input, SiLU output, up output,
//! their product: 8f). In all `16h` replicated and `10h + 2g + 8f + 4a` tensor-split: 54.3h for
//! 70B at t = 1 against 54.1h measured, 20.8h at t = 8 against 20.8h.
//!
//! ## Recomputation
//! - **none**: every tensor above is kept.
//! - **selective** (Korthikanti §5): the attention core is recomputed in backward and keeps only
//!   its inputs. With FlashAttention that saves just the log-sum-exp: the core never stored the
//!   `s × s` matrix that selective recomputation was invented to drop.
//! - **full**: each layer keeps only its input, `2h` per token (split by t under sequence
//!   parallelism), and recomputes the rest in backward. The calibration measured exactly this.
//! - Megatron-core's **modules** beside none or selective: `mla_up_proj` (latent attention's
//!   queries, keys, values and the up-projections' saved inputs, [`Setting::latent_recompute`]),
//!   `layernorm` (an MoE layer's pre-MLP norm output, [`Setting::norm_output`]), `moe_act` and
//!   `moe` ([`Setting::stored_moe`]). An MoE layer keeps its router's BF16 input beside the
//!   GEMMs' FP8 copies ([`Setting::router_input`]).
//!
//! The **working set** is what one layer's backward needs on top, one layer at a time: the
//! tensors it recomputes (under full recomputation the whole no-recomputation set of the layer;
//! under selective, the attention core's) and the activation gradients alive at its peak, two
//! `f`-wide BF16 tensors in the MLP's backward. From the calibration (70B, b = 1 and b = 2) a
//! layer's backward peak grows by 4.73 GB a sequence with eager kernels: 3.64 GB of recomputed
//! activations and about 0.94 GB (4·s·f) of gradients; see `results/memory-validation.md`.

use crate::cost::step::MoeRecompute;

use crate::cost::step::experts::Routed;
use crate::cost::step::stack::Kernels;
use crate::cost::step::Recompute;
use crate::model::hybrid::Block;
use crate::model::moe_dense_part;
use crate::model::without_shared;
use crate::model::Shape;

/// The layer whose activations are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// A Llama layer (RMSNorm, GQA attention with RoPE, SwiGLU) with these kernels.
    Llama(Kernels),
    /// Korthikanti et al.'s GPT layer: LayerNorm, multi-head attention with a materialised
    /// softmax and dropout, a 4h GELU MLP. The reference the published formulas assume.
    Gpt,
}

/// How a kept tensor is divided among the TP ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Split {
    /// Divided by TP (heads or FFN columns).
    Tensor,
    /// Whole on each TP rank; divided by TP along the sequence under sequence parallelism.
    Replicated,
    /// Whole on each TP rank for every token, with or without sequence parallelism: latent
    /// attention's shared RoPE key, gathered from the sequence shards.
    Whole,
}

/// One tensor kept from forward to backward, per token of one sequence.
#[derive(Debug, Clone, Copy)]
struct Kept {
    bytes_per_token: f64,
    split: Split,
    /// Recomputed under selective recomputation.
    attention_core: bool,
    /// Latent attention's up-projections' inputs and outputs (the queries, keys and values),
    /// recomputed under Megatron-core's `mla_up_proj` module ([`Setting::latent_recompute`]).
    up_projection: bool,
}

const fn kept(bytes_per_token: f64, split: Split) -> Kept {
    Kept {
        bytes_per_token,
        split,
        attention_core: false,
        up_projection: false,
    }
}

const fn core(bytes_per_token: f64) -> Kept {
    Kept {
        bytes_per_token,
        split: Split::Tensor,
        attention_core: true,
        up_projection: false,
    }
}

/// What latent attention's up-projections make or take, which `mla_up_proj` recomputes.
const fn up(bytes_per_token: f64, split: Split) -> Kept {
    Kept {
        bytes_per_token,
        split,
        attention_core: false,
        up_projection: true,
    }
}

/// The tensors `layer` keeps with no recomputation, for `shape` at sequence length `s`; with
/// `fp8` (fused kernels) the QKV and gate/up inputs and SwiGLU's output are kept as the FP8
/// copies their GEMMs saved (1 byte an element, half), and the attention output is kept twice:
/// in BF16 for attention's backward and in FP8 for the output projection's (Transformer
/// Engine's `LayerNormLinear` and `Linear` save their FP8-cast inputs).
fn tensors(layer: Layer, shape: &Shape, s: f64, fp8: bool) -> Tensors {
    use Split::{Replicated, Tensor, Whole};
    let h = shape.hidden as f64;
    let f = shape.ffn as f64;
    let a = f64::from(shape.heads);
    let g = f64::from(shape.kv_heads) * shape.head_dim() as f64;
    // Queries and the attention output are a·d wide, h for Llama.
    let q = shape.attention_width() as f64;
    // SwiGLU's gate and up outputs, or a non-gated MLP's up output alone (squared ReLU's
    // input, [`Shape::mlp_inputs`]), in BF16.
    let gate_up = 2.0 * shape.mlp_inputs() as f64;
    match layer {
        Layer::Llama(Kernels::Lean) => {
            let mut fused = tensors(Layer::Llama(Kernels::Fused), shape, s, fp8);
            // The SwiGLU output (the list's last), recomputed from its inputs in backward.
            fused.len -= 1;
            fused
        }
        Layer::Llama(Kernels::Fused) if shape.attention.latent.is_some() => {
            let w = shape.attention_widths();
            let l = w.latent.expect("a latent shape has latent widths");
            let input = if fp8 { 1.0 } else { 2.0 };
            let output_copy = if fp8 { w.output } else { 0.0 };
            let q_rank = l.q_rank.unwrap_or(0.0);
            Tensors::of(&[
                kept(2.0 * h, Replicated), // attention RMSNorm input
                // The down-projections' input: one BF16 tensor, or each projection's FP8 copy.
                kept(2.0 * h, Replicated),
                kept(2.0 * q_rank + 2.0 * l.kv_rank, Replicated), // the latents' RMSNorm inputs
                up(input * (q_rank + l.kv_rank), Replicated),     // the up-projections' inputs
                kept(2.0 * l.rope, Whole), // the shared RoPE key, gathered whole
                up(2.0 * w.query, Tensor), // Q, RoPE applied
                up(2.0 * w.key, Tensor),   // K, the shared RoPE key in each head
                up(2.0 * w.value, Tensor), // V
                kept(2.0 * w.output + output_copy, Tensor), // attention output O (and its FP8 copy)
                core(4.0 * a),             // log-sum-exp, FP32
                kept(2.0 * h, Replicated), // MLP RMSNorm input
                kept(input * h, Replicated), // gate/up input
                kept(gate_up * f, Tensor), // gate and up outputs
                kept(input * f, Tensor),   // SwiGLU output (last: see Lean)
            ])
        }
        Layer::Llama(Kernels::Fused) => {
            // A GEMM's own input: BF16, or its FP8 copy.
            let input = if fp8 { 1.0 } else { 2.0 };
            let output_copy = if fp8 { q } else { 0.0 };
            Tensors::of(&[
                kept(2.0 * h, Replicated),           // attention RMSNorm input
                kept(input * h, Replicated),         // QKV input
                kept(2.0 * q, Tensor),               // Q after RoPE
                kept(4.0 * g, Tensor),               // K after RoPE, V
                kept(2.0 * q + output_copy, Tensor), // attention output O (and its FP8 copy)
                core(4.0 * a),                       // log-sum-exp, FP32
                kept(2.0 * h, Replicated),           // MLP RMSNorm input
                kept(input * h, Replicated),         // gate/up input
                kept(gate_up * f, Tensor),           // gate and up outputs
                kept(input * f, Tensor),             // SwiGLU output (last: see Lean)
            ])
        }
        Layer::Llama(Kernels::Eager) => Tensors::of(&[
            kept(6.0 * h, Replicated), // attention RMSNorm: FP32 upcast, BF16 normalised
            kept(2.0 * h, Replicated), // its output, the QKV input
            kept(2.0 * q, Tensor),     // Q before RoPE (kept by RoPE's slices)
            kept(2.0 * g, Tensor),     // K before RoPE
            kept(2.0 * q, Tensor),     // Q after RoPE
            kept(4.0 * q, Tensor),     // K after RoPE and V, repeated to every head
            kept(2.0 * q, Tensor),     // attention output
            core(4.0 * a),             // log-sum-exp, FP32
            kept(6.0 * h, Replicated), // MLP RMSNorm
            kept(2.0 * h, Replicated), // its output, the gate/up input
            kept(8.0 * f, Tensor),     // SiLU input and output, up output, product
        ]),
        Layer::Gpt => Tensors::of(&[
            kept(2.0 * h, Replicated), // LayerNorm 1 input
            kept(2.0 * h, Replicated), // QKV input
            kept(4.0 * h, Tensor),     // Q and K
            core(2.0 * a * s),         // softmax output
            core(a * s),               // softmax dropout mask
            core(2.0 * a * s),         // dropout output
            kept(2.0 * h, Tensor),     // V
            kept(2.0 * h, Tensor),     // output projection input
            kept(h, Replicated),       // attention dropout mask
            kept(2.0 * h, Replicated), // LayerNorm 2 input
            kept(2.0 * h, Replicated), // MLP input
            kept(8.0 * h, Tensor),     // GELU input
            kept(8.0 * h, Tensor),     // GELU output
            kept(h, Replicated),       // MLP dropout mask
        ]),
    }
}

/// The tensors a layer keeps: at most [`MAX_TENSORS`], held without a heap allocation.
#[derive(Debug, Clone, Copy)]
struct Tensors {
    items: [Kept; MAX_TENSORS],
    len: usize,
}

/// The most tensors a layer of [`tensors`] keeps (a latent-attention layer's sixteen).
const MAX_TENSORS: usize = 16;

impl Tensors {
    fn of(list: &[Kept]) -> Tensors {
        let mut items = [kept(0.0, Split::Tensor); MAX_TENSORS];
        items[..list.len()].copy_from_slice(list);
        Tensors {
            items,
            len: list.len(),
        }
    }

    fn iter(&self) -> std::slice::Iter<'_, Kept> {
        self.items[..self.len].iter()
    }
}

/// Where one layer's activations are counted: the layer, the micro-batch and the split.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    /// The layer's implementation.
    pub layer: Layer,
    /// Sequence length s.
    pub seq_len: u64,
    /// Micro-batch size b, sequences.
    pub micro_batch: u64,
    /// Tensor-parallel degree t.
    pub tp: u64,
    /// Sequence parallelism (splits the replicated tensors along the sequence).
    pub sequence_parallel: bool,
    /// The inputs a GEMM alone keeps for its weight gradient are kept in FP8 (Transformer
    /// Engine's FP8 recipes), 1 byte an element; NVFP4 and MXFP4 steps are counted the same
    /// (their 1/2 + scales bytes would be less: an upper bound, not modelled finer yet).
    pub fp8: bool,
    /// Latent attention's up-projections recomputed in the backward (Megatron-core's
    /// `mla_up_proj` module, [`crate::cost::step::detailed::Options::latent_recompute`]):
    /// the queries, keys and values and the up-projections' saved inputs are freed after the
    /// attention core (`discard_output_and_register_recompute`) and projected again from the
    /// latents the checkpoint keeps, which the list keeps anyway (the latents' norm inputs
    /// and the shared RoPE key).
    pub latent_recompute: bool,
    /// The router's probabilities multiply each route inside the experts' activation
    /// (Megatron-core's `weighted_bias_swiglu_impl` in `TEGroupedMLP`, and Transformer
    /// Engine's fused grouped MLP, which scale SwiGLU's output by the route's probability),
    /// so the probability's gradient comes from what the activation keeps; else the combine
    /// weighs each expert's output and keeps it for that gradient, `2h` a route (the stacks'
    /// `Settings::probs_in_activation`).
    pub probs_in_activation: bool,
}

impl Setting {
    /// Bytes one rank keeps of `tensor` for a micro-batch.
    fn bytes(&self, tensor: &Kept) -> f64 {
        let tokens = (self.seq_len * self.micro_batch) as f64;
        let split = match tensor.split {
            Split::Tensor => true,
            Split::Replicated => self.sequence_parallel,
            Split::Whole => false,
        };
        let share = if split { self.tp as f64 } else { 1.0 };
        tokens * tensor.bytes_per_token / share
    }

    fn sum(&self, shape: &Shape, keep: impl Fn(&Kept) -> bool) -> f64 {
        tensors(self.layer, shape, self.seq_len as f64, self.fp8)
            .iter()
            .filter(|t| keep(t))
            .map(|t| self.bytes(t))
            .sum()
    }

    /// Bytes one TP rank keeps from forward to backward for one layer and one micro-batch.
    pub fn stored(&self, shape: &Shape, recompute: Recompute) -> f64 {
        match recompute {
            Recompute::None => self.sum(shape, |t| !self.recomputes_up(t)),
            Recompute::Selective => {
                self.sum(shape, |t| !t.attention_core && !self.recomputes_up(t))
            }
            Recompute::Full => self.layer_input(shape),
            Recompute::SelectiveOp => self.selective_op(shape),
            Recompute::SaveQkv => {
                let g = f64::from(shape.kv_heads) * shape.head_dim() as f64;
                let q = shape.attention_width() as f64;
                self.layer_input(shape) + self.bytes(&kept(2.0 * q + 4.0 * g, Split::Tensor))
            }
            Recompute::SelectiveLayer => {
                (self.stored(shape, Recompute::None) + self.stored(shape, Recompute::Full)) / 2.0
            }
        }
    }

    /// Whether `tensor` is one `mla_up_proj` recomputes and the step recomputes it.
    fn recomputes_up(&self, tensor: &Kept) -> bool {
        self.latent_recompute && tensor.up_projection
    }

    /// What torchtitan's op-level policy keeps (`_save_list` in torchtitan's
    /// `parallelize_llama.py`: the outputs of matrix products except every second one, of
    /// scaled-dot-product attention and of reduce-scatters): the layer's input 2h, the Q, V and
    /// gate projections' outputs 2q + 2g + 2f, the down projection's output 2h, and attention's
    /// output 2q and FP32 log-sum-exp 4a per token. The K, attention-output and up projections
    /// and every element-wise result are recomputed.
    fn selective_op(&self, shape: &Shape) -> f64 {
        use Split::{Replicated, Tensor};
        let h = shape.hidden as f64;
        let f = shape.ffn as f64;
        let a = f64::from(shape.heads);
        let g = f64::from(shape.kv_heads) * shape.head_dim() as f64;
        let q = shape.attention_width() as f64;
        [
            kept(2.0 * h, Replicated), // layer input
            kept(2.0 * q, Tensor),     // Q projection
            kept(2.0 * g, Tensor),     // V projection
            kept(2.0 * f, Tensor),     // gate projection
            kept(2.0 * h, Replicated), // down projection
            kept(2.0 * q, Tensor),     // attention output
            kept(4.0 * a, Tensor),     // log-sum-exp
        ]
        .iter()
        .map(|t| self.bytes(t))
        .sum()
    }

    /// The output an MoE layer's pre-MLP RMSNorm keeps, its BF16 `2·s·b·h` bytes (split by t
    /// under sequence parallelism), whatever the step's precision: the router's matrix runs
    /// outside the FP8 recipes and keeps its BF16 input (Megatron-core's
    /// `RouterGatingLinearFunction` saves `inp` and casts to FP32 inside), which in BF16 is
    /// also the shared experts' and the dispatch's input. What Megatron-core's
    /// `--recompute-modules layernorm` recomputes from the norm's input instead of keeping
    /// (the FP8 copies the GEMMs made of it stay). It recomputes only norms that are modules
    /// of their own: Transformer Engine's layer spec fuses the attention's norm, and a dense
    /// layer's MLP norm, into the next GEMM (`LayerNormLinear`, the `IdentityOp` norms of
    /// `gpt_layer_specs.py`), which keeps its output, so only an MoE layer's pre-MLP norm is
    /// recomputed.
    pub fn norm_output(&self, shape: &Shape) -> f64 {
        self.bytes(&kept(2.0 * shape.hidden as f64, Split::Replicated))
    }

    /// What an MoE layer keeps of its pre-MLP norm's output beyond the dense part's list,
    /// which counts one GEMM input of `input·h` bytes a token (the shared experts' gate/up
    /// input): the norm's BF16 output `2h` ([`Setting::norm_output`]), and with
    /// FP8 the shared experts' own FP8 copy `h` where they run and are not recomputed with the
    /// layer (`moe`). 0 in BF16, where they are one tensor; `h` or `2h` with FP8 (DeepSeek-V3:
    /// 14,336 bytes a token, the router's input the dense part's list left out).
    pub fn router_input(&self, shape: &Shape, r: &Routed, moe: MoeRecompute) -> f64 {
        if !matches!(self.layer, Layer::Llama(Kernels::Fused | Kernels::Lean)) {
            return 0.0;
        }
        let h = shape.hidden as f64;
        let shared_copy = if self.fp8 && r.shared > 0.0 && moe != MoeRecompute::Layer {
            h
        } else {
            0.0
        };
        let extra = 2.0 * h + shared_copy - self.input_bytes() * h;
        self.bytes(&kept(extra, Split::Replicated))
    }

    /// Bytes of SwiGLU's output a route keeps at width `f_e/ETP` under the layer's kernels, what
    /// `moe_act` recomputes: the fused kernels keep it as the down projection's input (BF16 or
    /// its FP8 copy), the eager ones in BF16, the lean ones never.
    fn act_output(&self, r: &Routed) -> f64 {
        let per = match self.layer {
            Layer::Llama(Kernels::Fused) | Layer::Gpt => self.input_bytes(),
            Layer::Llama(Kernels::Eager) => 2.0,
            Layer::Llama(Kernels::Lean) => 0.0,
        };
        r.routes * per * r.width
    }

    /// The layer's BF16 input, `2·s·b·h` bytes, split by t under sequence parallelism: all a
    /// layer keeps under full recomputation.
    pub fn layer_input(&self, shape: &Shape) -> f64 {
        self.bytes(&kept(2.0 * shape.hidden as f64, Split::Replicated))
    }

    /// Transient bytes of one layer's backward, on top of what is stored: the activations it
    /// recomputes (all of them under full recomputation, the attention core under selective,
    /// and latent attention's queries, keys and values under `mla_up_proj`)
    /// plus the activation gradients alive at the backward's peak, two `f`-wide BF16 tensors
    /// (`4·f` bytes per token, ÷t): the gradient arriving at the SwiGLU output and one it
    /// produces for its inputs, in the MLP's backward, which comes first.
    pub fn working_set(&self, shape: &Shape, recompute: Recompute) -> f64 {
        let recomputed = match recompute {
            Recompute::None => self.sum(shape, |t| self.recomputes_up(t)),
            Recompute::Selective => self.sum(shape, |t| t.attention_core || self.recomputes_up(t)),
            Recompute::Full | Recompute::SelectiveLayer => self.sum(shape, |_| true),
            // Everything but the Q, K and V it kept.
            Recompute::SaveQkv => {
                let g = f64::from(shape.kv_heads) * shape.head_dim() as f64;
                let q = shape.attention_width() as f64;
                let kept_qkv = self.bytes(&kept(2.0 * q + 4.0 * g, Split::Tensor));
                (self.sum(shape, |_| true) - kept_qkv).max(0.0)
            }
            Recompute::SelectiveOp => {
                (self.sum(shape, |_| true) - self.selective_op(shape)).max(0.0)
            }
        };
        // With lean kernels the SwiGLU product is recomputed in backward too, 2f.
        let lean = if self.layer == Layer::Llama(Kernels::Lean) {
            self.bytes(&kept(2.0 * shape.ffn as f64, Split::Tensor))
        } else {
            0.0
        };
        recomputed + lean + self.bytes(&kept(4.0 * shape.ffn as f64, Split::Tensor))
    }
}

impl Setting {
    /// Bytes one rank keeps of an MoE layer's routed part for one micro-batch, `r` its
    /// routing ([`Routed`]): for each of its `R` routes the dispatched input the grouped GEMM
    /// keeps (`h`, BF16 or its FP8 copy), SwiGLU's inputs and output at the rank's width
    /// `f_e/ETP` (as a dense SwiGLU keeps them, [`Kernels`]) and, unless the probabilities
    /// multiply inside the activation ([`Setting::probs_in_activation`]), the expert's output
    /// the combine weights by the router's probability (`2h`, kept for the probability's
    /// gradient); and for each of the rank's `T/TP` tokens the router's FP32 logits and
    /// probabilities over the `E` experts (`8E`). Transformer Engine's fused grouped MLP
    /// (`ops/fused/grouped_mlp.py`, "save state for backward pass") keeps for DeepSeek-V3 in
    /// MXFP8 the gate/up input's FP8 copy (`h`), their BF16 output (`4f_e`), the
    /// probabilities and the down projection's FP8 input (`f_e`): 7,168 + 8,192 + 2,048 =
    /// 17,408 bytes a route here, 17,700 with the MXFP8 scales (1/32 of each copy) and the
    /// probability, which this count leaves out; and no expert output.
    fn routed_bytes(&self, shape: &Shape, r: &Routed) -> f64 {
        let h = shape.hidden as f64;
        let input = self.input_bytes();
        let f = r.width;
        let swiglu = match self.layer {
            Layer::Llama(Kernels::Fused) | Layer::Gpt => {
                2.0 * shape.mlp_inputs() as f64 * f + input * f
            }
            Layer::Llama(Kernels::Lean) => 4.0 * f,
            Layer::Llama(Kernels::Eager) => 8.0 * f,
        };
        let tokens = (self.seq_len * self.micro_batch) as f64 / self.tp as f64;
        let output = if self.probs_in_activation {
            0.0
        } else {
            2.0 * h
        };
        r.routes * (input * h + swiglu + output) + tokens * 8.0 * r.experts
    }

    /// Bytes one rank keeps of an MoE layer for one micro-batch under `recompute`: its dense
    /// part ([`crate::model::moe_dense_part`]: attention, the shared experts) as a dense layer keeps it, the
    /// router's BF16 input ([`Setting::router_input`]), and the routed part (`routed_bytes`)
    /// unless the layer is recomputed. Full
    /// recomputation keeps the layer's input alone; selective-layer half the layers each way.
    /// torchtitan's and MaxText's op-level policies are not modelled with experts (the detailed
    /// model refuses them). Beyond the step's recomputation ([`MoeRecompute`]), `moe` keeps none
    /// of the routed part nor of the shared experts ([`crate::model::without_shared`]; the dense part's input
    /// is the layer's) and `act` drops SwiGLU's output of every route, the down projection's
    /// input (`f_e/ETP` elements).
    pub fn stored_moe(
        &self,
        shape: &Shape,
        r: &Routed,
        recompute: Recompute,
        moe: MoeRecompute,
    ) -> f64 {
        let dense = moe_dense_part(shape);
        let routed = match moe {
            MoeRecompute::None => self.routed_bytes(shape, r),
            MoeRecompute::Act => self.routed_bytes(shape, r) - self.act_output(r),
            MoeRecompute::Layer => 0.0,
        };
        let dense = if moe == MoeRecompute::Layer && r.shared > 0.0 {
            without_shared(&dense)
        } else {
            dense
        };
        let router = self.router_input(shape, r, moe);
        match recompute {
            Recompute::Full => self.layer_input(shape),
            Recompute::SelectiveLayer => {
                (self.stored_moe(shape, r, Recompute::None, moe) + self.layer_input(shape)) / 2.0
            }
            Recompute::Selective => self.stored(&dense, Recompute::Selective) + routed + router,
            _ => self.stored(&dense, Recompute::None) + routed + router,
        }
    }

    /// Bytes of one element of a GEMM's saved input: 1 in FP8, else 2.
    fn input_bytes(&self) -> f64 {
        if self.fp8 {
            1.0
        } else {
            2.0
        }
    }

    /// Transient bytes of an MoE layer's backward ([`Setting::working_set`] for its dense
    /// part), with the routed part's: what it recomputes (all of it under full or
    /// selective-layer recomputation, and under `moe` the shared experts' activations too) and
    /// the two `f_e/ETP`-wide gradients of its SwiGLU, for every route, alive at the grouped
    /// GEMM's backward.
    pub fn working_set_moe(
        &self,
        shape: &Shape,
        r: &Routed,
        recompute: Recompute,
        moe: MoeRecompute,
    ) -> f64 {
        let dense = moe_dense_part(shape);
        // The norm's output the router keeps, and the shared experts' FP8 copy of it, come back
        // with the layer ([`Setting::router_input`]).
        let router = self.router_input(shape, r, MoeRecompute::None);
        let recomputed = match (recompute, moe) {
            (Recompute::Full | Recompute::SelectiveLayer, _) => {
                self.routed_bytes(shape, r) + router
            }
            // The shared experts' activations come back with the routed ones.
            (_, MoeRecompute::Layer) if r.shared > 0.0 => {
                let none = Recompute::None;
                let shared = self.stored(&dense, none) - self.stored(&without_shared(&dense), none);
                let copy = router - self.router_input(shape, r, MoeRecompute::Layer);
                self.routed_bytes(shape, r) + shared + copy
            }
            (_, MoeRecompute::Layer) => self.routed_bytes(shape, r),
            (_, MoeRecompute::Act) => self.act_output(r),
            _ => 0.0,
        };
        let gradients = r.routes * 4.0 * r.width;
        self.working_set(&dense, recompute) + recomputed + gradients
    }

    /// What one block of a hybrid pattern keeps for a micro-batch ([`crate::model::hybrid`]),
    /// a layer's list ([`tensors`]) taken apart by block: a layer of attention alone keeps
    /// the attention block's tensors and its absent MLP's norm input and GEMM input
    /// ([`Setting::mlp_norm`]), so
    /// - `*` keeps that layer's less the MLP's norm;
    /// - `-` a layer of the shape's MLP less that attention layer, plus its norm;
    /// - `E` an MoE layer ([`Setting::stored_moe`]) less that attention layer, plus its norm;
    /// - `M` [`Setting::mamba_stored`].
    ///
    /// Full recomputation keeps each block's input (`2·s·b·h`), selective-layer half the
    /// blocks each way; `routed` is the MoE blocks' routing.
    pub fn stored_block(
        &self,
        shape: &Shape,
        block: Block,
        routed: Option<&Routed>,
        recompute: Recompute,
        moe: MoeRecompute,
    ) -> f64 {
        match recompute {
            Recompute::Full => return self.layer_input(shape),
            Recompute::SelectiveLayer => {
                let none = self.stored_block(shape, block, routed, Recompute::None, moe);
                return (none + self.layer_input(shape)) / 2.0;
            }
            _ => {}
        }
        let attention = without_shared(&moe_dense_part(shape));
        let base = self.stored(&attention, recompute);
        let norm = self.mlp_norm(shape);
        match block {
            Block::Attention => base - norm,
            Block::Mlp => {
                let mlp = Shape {
                    experts: None,
                    ..shape.clone()
                };
                self.stored(&mlp, recompute) - base + norm
            }
            Block::Moe => routed.map_or(0.0, |r| {
                self.stored_moe(shape, r, recompute, moe) - base + norm
            }),
            Block::Mamba => shape
                .hybrid
                .as_ref()
                .map_or(0.0, |h| self.mamba_stored(shape, &h.mamba)),
        }
    }

    /// An MLP's norm input (`2h`) and its normalised output its first GEMM keeps (BF16 or
    /// its FP8 copy), both `h` wide on the sequence shard: the last two tensors a layer's
    /// attention half does not need.
    fn mlp_norm(&self, shape: &Shape) -> f64 {
        let h = shape.hidden as f64;
        self.bytes(&kept((2.0 + self.input_bytes()) * h, Split::Replicated))
    }

    /// What a Mamba-2 block keeps for a micro-batch (Megatron-core's `MambaMixer` with
    /// Transformer Engine): its input (`2h`) and `in_proj`'s normalised input (BF16 or its
    /// FP8 copy, `LayerNormColumnParallelLinear`), on the sequence shard; split over TP,
    /// what `mamba_split_conv1d_scan_combined` saves, `in_proj`'s output `zxbcdt`
    /// (`2·(2·d_in + 2·G·N + H)`, from which its backward recomputes the convolution and the
    /// chunk states)
    /// and the scan's output `y` before its gated norm (`2·d_in`) with the norm's FP32
    /// reciprocal deviations (`4·G`), and `out_proj`'s input (BF16 or FP8, `d_in`).
    /// Nemotron 3 Nano in BF16: 2,688·4 + 2·10,304 + 2·4,096 + 32 + 2·4,096 = 47,776 bytes a
    /// token at TP 1.
    pub fn mamba_stored(&self, shape: &Shape, m: &crate::model::hybrid::Mamba) -> f64 {
        let h = shape.hidden as f64;
        let input = self.input_bytes();
        let (d_in, projected) = (m.inner() as f64, m.projected() as f64);
        self.bytes(&kept((2.0 + input) * h, Split::Replicated))
            + self.bytes(&kept(
                2.0 * projected + 2.0 * d_in + 4.0 * f64::from(m.groups) + input * d_in,
                Split::Tensor,
            ))
    }

    /// Transient bytes of a hybrid model's backward beside what its blocks keep: the most
    /// of any kind it has. An attention block as a layer of attention alone
    /// ([`Setting::working_set`]), an MLP block as a layer of the shape's, an MoE block as an
    /// MoE layer ([`Setting::working_set_moe`]), a Mamba-2 block what the combined scan's
    /// backward holds at once: the recomputed convolution output (`2·(d_in + 2·G·N)`),
    /// `zxbcdt`'s gradient (`2·(2·d_in + 2·G·N + H)`), `y`'s (`2·d_in`) and the recomputed
    /// FP32 chunk states (`4·H·P·N/Q` a token, [`crate::cost::chip::operations::SSD_CHUNK`]),
    /// all over TP; with full or selective-layer recomputation its kept tensors too.
    pub fn working_set_blocks(
        &self,
        shape: &Shape,
        routed: Option<&Routed>,
        recompute: Recompute,
        moe: MoeRecompute,
    ) -> f64 {
        let Some(hybrid) = &shape.hybrid else {
            return 0.0;
        };
        let c = hybrid.counts();
        let m = &hybrid.mamba;
        let attention = without_shared(&moe_dense_part(shape));
        let mlp = Shape {
            experts: None,
            ..shape.clone()
        };
        let states = 4.0 * f64::from(m.heads) * (m.head_dim * m.state) as f64
            / crate::cost::chip::operations::SSD_CHUNK;
        let transient = 2.0 * m.conv_channels() as f64
            + 2.0 * m.projected() as f64
            + 2.0 * m.inner() as f64
            + states;
        let again = if matches!(recompute, Recompute::Full | Recompute::SelectiveLayer) {
            self.mamba_stored(shape, m)
        } else {
            0.0
        };
        let kinds = [
            (c.mamba > 0).then(|| self.bytes(&kept(transient, Split::Tensor)) + again),
            (c.attention > 0).then(|| self.working_set(&attention, recompute)),
            (c.mlp > 0).then(|| self.working_set(&mlp, recompute)),
            routed
                .filter(|_| c.moe > 0)
                .map(|r| self.working_set_moe(shape, r, recompute, moe)),
        ];
        kinds.into_iter().flatten().fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latent_attention_keeps_its_latents_on_the_sequence_shard_and_every_head_s_keys() {
        // DeepSeek-V3's attention with its dense MLP (f 18,432), BF16, s = 4,096, no
        // recomputation, by hand from the table: replicated 8h + 2(r_q + r_kv)·2 = 57,344 +
        // 8,192, whole 2·d_rope = 128, split 2q + 2k + 2v + 2o + 4a = 163,840 + 512 and the
        // MLP's 6f = 110,592.
        let shape = crate::model::testing::latent(1);
        let at = |tp: u64, sequence_parallel: bool| {
            Setting {
                layer: Layer::Llama(Kernels::Fused),
                seq_len: 4_096,
                micro_batch: 1,
                tp,
                sequence_parallel,
                fp8: false,
                latent_recompute: false,
                probs_in_activation: false,
            }
            .stored(&shape, Recompute::None)
        };
        assert_eq!(at(1, false), 4_096.0 * 340_608.0);
        // TP 8 with sequence parallelism splits all but the shared RoPE key.
        let per_token = (57_344.0 + 8_192.0) / 8.0 + 128.0 + (164_352.0 + 110_592.0) / 8.0;
        assert_eq!(at(8, true), 4_096.0 * per_token);
    }
    use crate::model::preset;

    fn setting(layer: Layer, tp: u64, sp: bool) -> Setting {
        Setting {
            layer,
            seq_len: 8192,
            micro_batch: 1,
            tp,
            sequence_parallel: sp,
            fp8: false,
            latent_recompute: false,
            probs_in_activation: false,
        }
    }

    #[test]
    fn a_mamba_block_keeps_what_its_combined_scan_saves_and_a_layer_is_two_blocks() {
        // Nemotron 3 Nano's mixer, BF16, TP 1, one sequence of 8,192: 2,688·4 + 2·10,304 +
        // 2·4,096 + 4·8 + 2·4,096 = 47,776 bytes a token (worked out by hand in the doc).
        let shape: Shape = serde_json::from_str(
            r#"{"name":"h","layers":2,"hidden":2688,"ffn":1856,"heads":32,"kv_heads":2,
            "head_dim":128,"vocab":131072,"hybrid":{"pattern":"M*","mamba":{"heads":64,
            "head_dim":64,"groups":8,"state":128,"conv_kernel":4}}}"#,
        )
        .unwrap();
        let s = setting(Layer::Llama(Kernels::Fused), 1, false);
        let m = shape.hybrid.as_ref().unwrap().mamba;
        assert_eq!(s.mamba_stored(&shape, &m), 47_776.0 * 8192.0);
        // An attention block and an MLP block keep what one layer keeps.
        let none = Recompute::None;
        let block = |b| s.stored_block(&shape, b, None, none, MoeRecompute::None);
        let layer = s.stored(&shape, none);
        assert!((block(Block::Attention) + block(Block::Mlp) - layer).abs() < 1e-6);
        // Non-gated: the MLP block keeps the up projection's output alone, `2f` not `4f`,
        // beside its norm's input and output and the down projection's input.
        let mlp = (2.0 * 2688.0 + 2.0 * 2688.0 + 2.0 * 1856.0 + 2.0 * 1856.0) * 8192.0;
        assert_eq!(block(Block::Mlp), mlp);
        // Under full recomputation each block keeps its input.
        let full = s.stored_block(
            &shape,
            Block::Mamba,
            None,
            Recompute::Full,
            MoeRecompute::None,
        );
        assert_eq!(full, 2.0 * 2688.0 * 8192.0);
    }

    /// Llama 3 8B's attention with 8 routed experts of width 14,336 (two a token) and, when
    /// `shared` is not 0, shared experts of that width; and one rank's routing of 8,192 tokens.
    fn moe_shape(shared: u64) -> (Shape, Routed) {
        let mut shape = preset("8b").unwrap();
        let mut experts = crate::model::Experts::plain(8, 2, 14_336);
        experts.shared_ffn = shared;
        shape.experts = Some(experts);
        let sent = 8192.0 * 2.0;
        let r = Routed {
            routes: sent,
            sent,
            local_experts: 8.0,
            width: 14_336.0,
            shared: shared as f64,
            experts: 8.0,
            per_token: 2.0,
            groups: None,
        };
        (shape, r)
    }

    #[test]
    fn moe_recomputation_keeps_nothing_of_the_shared_experts() {
        // Megatron-core's `moe` module checkpoints the whole MoE layer, shared experts with
        // the routed ones: what the layer keeps is the same with or without them, and its
        // backward's working set holds their activations again.
        let st = setting(Layer::Llama(Kernels::Fused), 1, false);
        let (plain, rp) = moe_shape(0);
        let (shared, rs) = moe_shape(5632);
        for recompute in [
            Recompute::None,
            Recompute::Selective,
            Recompute::SelectiveLayer,
        ] {
            let kept_plain = st.stored_moe(&plain, &rp, recompute, MoeRecompute::Layer);
            let kept_shared = st.stored_moe(&shared, &rs, recompute, MoeRecompute::Layer);
            assert_eq!(kept_plain, kept_shared, "{recompute:?}");
        }
        // Without `moe`, the shared experts' gate, up and SwiGLU outputs are kept: 6·5,632
        // bytes a token (BF16 gate and up outputs, SwiGLU's output).
        let none = Recompute::None;
        let more = st.stored_moe(&shared, &rs, none, MoeRecompute::None)
            - st.stored_moe(&plain, &rp, none, MoeRecompute::None);
        assert_eq!(more, 8192.0 * 6.0 * 5632.0);
        // The working set of `moe` without other recomputation: the same 6·f_s bytes a token
        // come back, beside the shared experts' two f_s-wide gradients (4·f_s).
        let none = Recompute::None;
        let grown = st.working_set_moe(&shared, &rs, none, MoeRecompute::Layer)
            - st.working_set_moe(&plain, &rp, none, MoeRecompute::Layer);
        assert_eq!(grown, 8192.0 * (6.0 + 4.0) * 5632.0);
    }

    /// DeepSeek-V3's MoE layer (latent attention, 256 routed experts of width 2,048 at top 8,
    /// one shared expert of 2,048) in MXFP8 at TP 1, and one rank's routing of its 4,096 tokens
    /// on 64 EP ranks (four experts each).
    fn deepseek_moe() -> (Shape, Routed, Setting) {
        let mut shape = crate::model::testing::latent(1);
        let mut experts = crate::model::Experts::plain(256, 8, 2_048);
        experts.shared_ffn = 2_048;
        shape.experts = Some(experts);
        let routes = 4_096.0 * 8.0;
        let r = Routed {
            routes,
            sent: routes,
            local_experts: 4.0,
            width: 2_048.0,
            shared: 2_048.0,
            experts: 256.0,
            per_token: 8.0,
            groups: None,
        };
        let st = Setting {
            layer: Layer::Llama(Kernels::Fused),
            seq_len: 4_096,
            micro_batch: 1,
            tp: 1,
            sequence_parallel: false,
            fp8: true,
            latent_recompute: false,
            probs_in_activation: true,
        };
        (shape, r, st)
    }

    #[test]
    fn a_fused_grouped_mlp_keeps_no_expert_output_and_the_router_keeps_its_bf16_input() {
        // Transformer Engine's fused grouped MLP (Megatron-core's weighted SwiGLU) keeps a
        // route's FP8 input h, its BF16 gate/up output 4·f_e and the down projection's FP8
        // input f_e: 7,168 + 8,192 + 2,048 = 17,408 bytes; a combine that weighs the expert's
        // output keeps 2h = 14,336 more.
        let (shape, r, st) = deepseek_moe();
        let none = (Recompute::None, MoeRecompute::None);
        let fused = st.stored_moe(&shape, &r, none.0, none.1);
        let weighed = Setting {
            probs_in_activation: false,
            ..st
        }
        .stored_moe(&shape, &r, none.0, none.1);
        assert_eq!(weighed - fused, r.routes * 14_336.0);
        assert_eq!(
            st.routed_bytes(&shape, &r),
            r.routes * 17_408.0 + 4_096.0 * 8.0 * 256.0
        );
        // The router's BF16 input, 2h a token, beside the shared expert's FP8 copy h (which the
        // dense part's list counts): 14,336 bytes a token in FP8, none more in BF16, where they
        // are one tensor.
        assert_eq!(st.router_input(&shape, &r, none.1), 4_096.0 * 14_336.0);
        let bf16 = Setting { fp8: false, ..st };
        assert_eq!(bf16.router_input(&shape, &r, none.1), 0.0);
        // `layernorm` recomputes the norm's output: what is left of it is the shared expert's
        // FP8 copy in FP8, nothing in BF16.
        let norm_left = |st: &Setting| {
            st.router_input(&shape, &r, none.1) + st.input_bytes() * 4_096.0 * 7_168.0
                - st.norm_output(&shape)
        };
        assert_eq!(norm_left(&st), 4_096.0 * 7_168.0);
        assert_eq!(norm_left(&bf16), 0.0);
    }

    #[test]
    fn recomputing_the_up_projections_frees_the_queries_keys_values_and_their_inputs() {
        // DeepSeek-V3 in MXFP8: Q 128·192, K 128·192 and V 128·128 in BF16 (131,072 bytes a
        // token) and the up-projections' FP8 inputs r_q + r_kv = 2,048 are freed; the latents
        // the checkpoint keeps (their norms' BF16 inputs, 4,096) and the shared RoPE key stay.
        let (shape, r, st) = deepseek_moe();
        let up = Setting {
            latent_recompute: true,
            ..st
        };
        for recompute in [Recompute::None, Recompute::Selective] {
            let freed = st.stored(&shape, recompute) - up.stored(&shape, recompute);
            assert_eq!(freed, 4_096.0 * (131_072.0 + 2_048.0), "{recompute:?}");
            let moe = MoeRecompute::None;
            let freed = st.stored_moe(&shape, &r, recompute, moe)
                - up.stored_moe(&shape, &r, recompute, moe);
            assert_eq!(freed, 4_096.0 * (131_072.0 + 2_048.0), "{recompute:?}");
            // They come back for the backward: the working set holds them again.
            let back = up.working_set(&shape, recompute) - st.working_set(&shape, recompute);
            assert_eq!(back, 4_096.0 * (131_072.0 + 2_048.0), "{recompute:?}");
        }
    }

    /// Bytes per `s·b·h` for a GPT layer of hidden size h and a heads at sequence length s.
    fn gpt_per_sbh(tp: u64, sp: bool, recompute: Recompute) -> f64 {
        // A GPT-3-like shape: h = 12,288, a = 96, s = 2,048 (Korthikanti et al. Table 3).
        let shape = Shape::new("gpt", 96, 12_288, 4 * 12_288, 96, 96, 51_200).unwrap();
        let st = Setting {
            layer: Layer::Gpt,
            seq_len: 2048,
            micro_batch: 1,
            tp,
            sequence_parallel: sp,
            fp8: false,
            latent_recompute: false,
            probs_in_activation: false,
        };
        st.stored(&shape, recompute) / (2048.0 * 12_288.0)
    }

    #[test]
    fn the_gpt_layer_reproduces_korthikanti_table_2_exactly() {
        let (h, a, s) = (12_288.0, 96.0, 2048.0);
        let attn = 5.0 * a * s / h;
        for t in [1u64, 2, 4, 8] {
            let tf = t as f64;
            let rows = [
                (false, Recompute::None, 10.0 + 24.0 / tf + attn / tf),
                (true, Recompute::None, 34.0 / tf + attn / tf),
                (false, Recompute::Selective, 10.0 + 24.0 / tf),
                (true, Recompute::Selective, 34.0 / tf),
                (false, Recompute::Full, 2.0),
            ];
            for (sp, rc, want) in rows {
                let got = gpt_per_sbh(t, sp, rc);
                assert!(
                    (got - want).abs() < 1e-12,
                    "t={t} sp={sp} {rc:?}: {got} vs {want}"
                );
            }
        }
        // No parallelism: sbh(34 + 5as/h).
        assert!((gpt_per_sbh(1, false, Recompute::None) - (34.0 + attn)).abs() < 1e-12);
    }

    #[test]
    fn full_recomputation_keeps_two_s_b_h_as_measured() {
        // calibration: 134,217,728 B per layer at h = 8,192; b = 2 stores exactly twice.
        let s = preset("70b").unwrap();
        let one = setting(Layer::Llama(Kernels::Fused), 1, false);
        assert_eq!(one.stored(&s, Recompute::Full), 134_217_728.0);
        let two = Setting {
            micro_batch: 2,
            ..one
        };
        assert_eq!(two.stored(&s, Recompute::Full), 268_435_456.0);
        let sp = setting(Layer::Llama(Kernels::Fused), 8, true);
        assert_eq!(sp.stored(&s, Recompute::Full), 134_217_728.0 / 8.0);
    }

    #[test]
    fn eager_llama_matches_the_measured_no_recompute_footprint_within_3_percent() {
        // calibration per_layer_over_sbh: 8B 53.16 (t=1), 20.88 (t=8); 70B 54.09, 20.82;
        // 405B 34.05 (t=2), 20.54 (t=8). No sequence parallelism.
        let cases = [
            ("8b", 1, 53.158),
            ("8b", 8, 20.881),
            ("70b", 1, 54.095),
            ("70b", 8, 20.817),
            ("405b", 2, 34.047),
            ("405b", 8, 20.536),
        ];
        for (model, tp, measured) in cases {
            let s = preset(model).unwrap();
            let st = setting(Layer::Llama(Kernels::Eager), tp, false);
            let per_sbh = st.stored(&s, Recompute::None) / (8192.0 * s.hidden as f64);
            let err = (per_sbh - measured) / measured;
            assert!(
                err.abs() < 0.03,
                "{model} t={tp}: {per_sbh:.3} vs {measured} ({err:+.3})"
            );
        }
    }

    #[test]
    fn fused_llama_70b_keeps_33_5_h_per_token_without_parallelism() {
        // 8h + 4h + 4g + 6f + 4a = 12·8192 + 4·1024 + 6·28672 + 4·64 bytes per token.
        let s = preset("70b").unwrap();
        let st = setting(Layer::Llama(Kernels::Fused), 1, false);
        let per_token = st.stored(&s, Recompute::None) / 8192.0;
        assert_eq!(
            per_token,
            12.0 * 8192.0 + 4.0 * 1024.0 + 6.0 * 28_672.0 + 4.0 * 64.0
        );
    }

    #[test]
    fn with_flash_attention_selective_saves_only_the_log_sum_exp() {
        let s = preset("70b").unwrap();
        let st = setting(Layer::Llama(Kernels::Fused), 8, true);
        let saved = st.stored(&s, Recompute::None) - st.stored(&s, Recompute::Selective);
        assert_eq!(saved, 8192.0 * 4.0 * 64.0 / 8.0);
        let gradients = 8192.0 * 4.0 * 28_672.0 / 8.0;
        assert_eq!(st.working_set(&s, Recompute::Selective), saved + gradients);
    }

    #[test]
    fn stored_memory_never_rises_with_more_recomputation() {
        let s = preset("405b").unwrap();
        for layer in [
            Layer::Llama(Kernels::Fused),
            Layer::Llama(Kernels::Eager),
            Layer::Gpt,
        ] {
            for (tp, sp) in [(1, false), (8, false), (8, true)] {
                let st = setting(layer, tp, sp);
                let [none, sel, full, op, layer_, qkv] = Recompute::ALL.map(|r| st.stored(&s, r));
                assert!(none >= sel && sel >= full, "{layer:?} t={tp} sp={sp}");
                assert!(none >= layer_ && layer_ >= full && op >= full && qkv >= full);
            }
        }
    }
}
