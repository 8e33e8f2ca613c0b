//! FLOPs per token: the model FLOPs MFU counts and the hardware FLOPs a layer runs on one TP
//! rank, recomputation included.

use crate::cost::step::Recompute;
use crate::model::Shape;
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
pub fn layer_forward_flops(shape: &Shape, tp: u64, seq_len: u64) -> (f64, f64) {
    layer_forward_flops_with(shape, shape.layer_matrix_params(), tp, seq_len)
}

/// [`layer_forward_flops`] of a layer whose matrices that multiply a token hold `matrices`
/// parameters (an MoE layer's: [`Shape::moe_layer_matrix_params`]).
pub fn layer_forward_flops_with(shape: &Shape, matrices: u64, tp: u64, seq_len: u64) -> (f64, f64) {
    let width = shape.attention_width() as f64;
    let matrices = 2.0 * matrices as f64 / tp as f64;
    let attention = 2.0 * seq_len as f64 * width / tp as f64;
    (matrices, attention)
}

/// Hardware FLOPs per token of one layer on one TP rank for forward, backward and
/// recomputation, and the forward's share of them.
pub fn layer_flops(shape: &Shape, tp: u64, seq_len: u64, recompute: Recompute) -> (f64, f64) {
    layer_flops_with(shape, shape.layer_matrix_params(), tp, seq_len, recompute)
}

/// [`layer_flops`] of a layer whose matrices that multiply a token hold `matrices` parameters.
pub fn layer_flops_with(
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
