//! FLOPs per token: the model FLOPs MFU counts and the hardware FLOPs a layer runs on one TP
//! rank, recomputation included.

use crate::cost::step::Recompute;
use crate::model::Shape;
/// Model FLOPs per token, `6·N_matrix + 6·L·s·h`: SPEC.md §4's `6N + 6·L·s·h` (Megatron-LM)
/// counted over the parameters that multiply, leaving out the input embedding (a lookup, as
/// PaLM's MFU does) and the RMSNorm and bias vectors (elementwise): `N_matrix =
/// Shape::matrix_params`, which is `N − V·h − (2L + 1)·h` for Llama 3. Attention's width is
/// `a·d` (`h` for Llama), and for latent attention `a·(d_qk + d_v)/2`
/// ([`Shape::attention_core_width`]: its query-key products are wider than its values); a
/// layer under a sliding window counts the keys its window lets a query see, `s` becoming
/// [`Shape::attention_sequence`]. So hardware FLOPs are never fewer than model FLOPs:
/// HFU ≥ MFU.
///
/// Multi-token-prediction depths count as Megatron-core's FLOP counter counts them
/// (`num_floating_point_operations`, `mtp_num_layers`): each a layer of the last layer's kind
/// with its attention, its `2h → h` projection and the head once more
/// ([`Shape::mtp_matrix_params`]), so an MFU with MTP is comparable with one Megatron reports;
/// the objective's extra tokens are trained, not overhead.
///
/// A hybrid model ([`Shape::hybrid`]) counts attention on its attention blocks alone and,
/// for each Mamba-2 block, the SSD scan's `3·7·d_in·N` (Megatron-LM's `hybrid_flops`, with
/// the mixer's true inner width `H·P` where Megatron-LM takes `2h`); its projections are in
/// `6·N_matrix`.
pub fn model_flops_per_token(shape: &Shape, seq_len: u64) -> f64 {
    if let Some(hybrid) = &shape.hybrid {
        let blocks = hybrid.counts();
        return 6.0 * shape.matrix_params() as f64
            + 6.0 * blocks.attention as f64 * seq_len as f64 * shape.attention_core_width()
            + 3.0 * blocks.mamba as f64 * hybrid.mamba.scan_flops();
    }
    let l = f64::from(shape.layers + shape.mtp);
    let width = shape.attention_core_width();
    6.0 * (shape.matrix_params() + shape.mtp_matrix_params()) as f64
        + 6.0 * l * shape.attention_sequence(seq_len) * width
}

/// Forward FLOPs per token of one layer on one TP rank: `(2·P_matrices + 2·s·a·d) / t`
/// (`a·d = h` for Llama; [`Shape::attention_core_width`] in its place for latent attention);
/// the first term the matrices, the second causal attention. Latent attention's
/// down-projections count as split too: under sequence parallelism each rank runs them on its
/// `1/t` of the tokens; without it every rank runs them whole (Megatron-core's duplicated
/// linears), which this count leaves out (a lower bound on the hardware FLOPs there).
pub fn layer_forward_flops(shape: &Shape, tp: u64, seq_len: u64) -> (f64, f64) {
    layer_forward_flops_with(shape, shape.layer_matrix_params(), tp, seq_len)
}

/// [`layer_forward_flops`] of a layer whose matrices that multiply a token hold `matrices`
/// parameters (an MoE layer's: [`Shape::moe_layer_matrix_params`]).
pub fn layer_forward_flops_with(shape: &Shape, matrices: u64, tp: u64, seq_len: u64) -> (f64, f64) {
    let width = shape.attention_core_width();
    let matrices = 2.0 * matrices as f64 / tp as f64;
    let attention = 2.0 * shape.attention_sequence(seq_len) * width / tp as f64;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latent_attention_counts_its_query_key_and_value_widths() {
        // DeepSeek-V3's 61 layers at s = 4,096: 6·L·s·a·(d_qk + d_v)/2 = 6 · 61 · 4,096 ·
        // 128 · (192 + 128)/2 = 30,702,305,280 FLOPs a token beside the matrices' 6·N_matrix.
        let shape = crate::model::testing::latent(61);
        let attention = model_flops_per_token(&shape, 4_096) - 6.0 * shape.matrix_params() as f64;
        assert_eq!(attention, 30_702_305_280.0);
        // A layer's forward on one of 8 TP ranks: 2·s·20,480/8 a token.
        let (_, core) = layer_forward_flops(&shape, 8, 4_096);
        assert_eq!(core, 2.0 * 4_096.0 * 20_480.0 / 8.0);
    }

    #[test]
    fn a_sliding_window_on_every_second_layer_counts_the_keys_it_lets_a_query_see() {
        // Llama 3 8B's 32 layers with gpt-oss's pattern, a 128-token window on every second
        // from the first: at s = 4,096 the windowed layers attend to 2·128 − 128²/4,096 = 252
        // of the causal count's 4,096, the mean layer to (252 + 4,096)/2 = 2,174, so
        // 6·32·(4,096 − 2,174)·4,096 = 1,511,522,304 model FLOPs a token fewer.
        let full = crate::model::preset("8b").unwrap();
        let mut windowed = full.clone();
        windowed.architecture.sliding_window = Some(128);
        windowed.architecture.window_layers =
            Some(crate::model::LayerSet::Every { first: 0, step: 2 });
        assert_eq!(windowed.attention_sequence(4_096), 2_174.0);
        let fewer = model_flops_per_token(&full, 4_096) - model_flops_per_token(&windowed, 4_096);
        assert_eq!(fewer, 1_511_522_304.0);
        // A window as long as the sequence is full causal attention.
        assert_eq!(windowed.attention_sequence(128), 128.0);
        assert_eq!(windowed.windowed(128), None);
    }
}
