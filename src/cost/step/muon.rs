//! Muon (Jordan et al. 2024; Liu et al. 2025, "Muon is Scalable for LLM Training", which
//! trained Moonlight and, as MuonClip, Kimi K2): SGD momentum on each hidden matrix, its update
//! orthogonalised by a Newton–Schulz iteration; AdamW on the rest (embeddings, output head,
//! norms, biases). As Megatron-core runs it (`--optimizer muon`, and `dist_muon`'s layer-wise
//! distributed optimizer, each data-parallel rank stepping whole matrices):
//!
//! - **State**: the FP32 master and one moment for a matrix ([`matrix_state_bytes`]), beside
//!   AdamW's master and two moments for the rest.
//! - **Work**: each matrix's update orthogonalised by `k` Newton–Schulz iterations
//!   ([`newton_schulz_flops`]), on this rank's TP shard of it (Megatron-core's default
//!   `--muon-tp-mode blockwise`), Q, K and V apart (`--muon-no-split-qkv` off), the layer's
//!   gate and up projection one matrix as it holds them ([`layer_flops`]).
//! - **Traffic**: under `dist_muon` (ZeRO 1 here) the gradients are all-reduced, each rank
//!   steps whole matrices (its share of the stage's, at least the largest one) and the
//!   updated weights are all-gathered ([`crate::cost::step_time`]).
//!
//! Megatron-core's Muon keeps FP32 masters and moments (no precision-aware optimizer, which
//! needs its distributed optimizer): other settings are refused.

use crate::cost::step::recipe::{MasterWeights, OptimizerStates};
use crate::model::Shape;

/// Megatron-core's `--muon-num-ns-steps` default, and Jordan's: 5 iterations.
pub const NS_STEPS: f64 = 5.0;

/// Bytes of state a hidden matrix's parameter keeps under Muon: its master weight and its one
/// moment, half of Adam's two (12 − 4 = 8 with both in FP32).
pub fn matrix_state_bytes(master: MasterWeights, states: OptimizerStates) -> f64 {
    master.bytes() + states.bytes() / 2.0
}

/// FLOPs of `steps` Newton–Schulz iterations on an `r × c` matrix (Jordan's quintic, on the
/// wide orientation, `a = min(r, c)`, `b = max(r, c)`): each forms `A = X·Xᵀ` (`2·a²·b`),
/// `B = β·A + γ·A·A` (`2·a³`) and `X ← α·X + B·X` (`2·a²·b`). A 4,096 × 4,096 matrix: 5 ×
/// (4 + 2) · 4,096³ = 2.06 TFLOP.
pub fn newton_schulz_flops(r: f64, c: f64, steps: f64) -> f64 {
    let (a, b) = if r <= c { (r, c) } else { (c, r) };
    steps * (4.0 * a * a * b + 2.0 * a * a * a)
}

/// One layer's dense matrices on one TP rank of `tp`, `mlp` wide (the FFN, or an MoE layer's
/// shared experts; 0 for none), each `(rows, columns, how many)`: Q (`h × q/t`), K and V
/// (`h × g/t`, two), the output (`q/t × h`), gate and up (`h × m·f/t`, `m` the MLP's inputs)
/// and down (`f/t × h`).
fn layer_matrices(shape: &Shape, tp: u64, mlp: u64) -> [(f64, f64, f64); 5] {
    let t = tp as f64;
    let h = shape.hidden as f64;
    let w = shape.attention_widths();
    let f = mlp as f64;
    let up = shape.mlp_inputs() as f64;
    [
        (h, w.query / t, 1.0),
        (h, w.key / t, 2.0),
        (w.query / t, h, 1.0),
        (h, up * f / t, 1.0),
        (f / t, h, 1.0),
    ]
}

/// Newton–Schulz FLOPs of one layer's dense matrices on one TP rank of `tp`, `mlp` wide
/// ([`layer_matrices`]; a matrix of no width costs nothing).
pub fn layer_flops(shape: &Shape, tp: u64, mlp: u64, steps: f64) -> f64 {
    layer_matrices(shape, tp, mlp)
        .iter()
        .filter(|(r, c, _)| r * c != 0.0)
        .fold(0.0, |sum, &(r, c, n)| {
            sum + n * newton_schulz_flops(r, c, steps)
        })
}

/// Newton–Schulz FLOPs of one MoE layer's router (`E × h`, whole on every rank, stepped with
/// the dense matrices' data-parallel group).
pub fn router_flops(shape: &Shape, steps: f64) -> f64 {
    shape.experts.as_ref().map_or(0.0, |e| {
        newton_schulz_flops(f64::from(e.routed), shape.hidden as f64, steps)
    })
}

/// Newton–Schulz FLOPs of one MoE layer's `local` experts on this rank, each `h × m·f_e/ETP`
/// and `f_e/ETP × h`; and of the larger of one expert's two.
pub fn experts_flops(shape: &Shape, local: f64, etp: u64, steps: f64) -> (f64, f64) {
    let Some(e) = &shape.experts else {
        return (0.0, 0.0);
    };
    let h = shape.hidden as f64;
    let f = e.ffn as f64 / etp as f64;
    let up = shape.mlp_inputs() as f64;
    let (fc1, fc2) = (
        newton_schulz_flops(h, up * f, steps),
        newton_schulz_flops(f, h, steps),
    );
    (local * (fc1 + fc2), fc1.max(fc2))
}

/// The Newton–Schulz FLOPs of a layer's largest dense matrix on one TP rank
/// ([`layer_matrices`]): what one data-parallel rank of `dist_muon`, which gives each rank
/// whole matrices, steps at least.
pub fn largest_flops(shape: &Shape, tp: u64, mlp: u64, steps: f64) -> f64 {
    layer_matrices(shape, tp, mlp)
        .iter()
        .filter(|(r, c, _)| r * c > 0.0)
        .map(|&(r, c, _)| newton_schulz_flops(r, c, steps))
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newton_schulz_costs_three_products_an_iteration() {
        // 4,096²: each iteration 2·4,096³ three times over.
        let n = 4_096.0f64;
        assert_eq!(newton_schulz_flops(n, n, 5.0), 5.0 * 6.0 * n.powi(3));
        // A tall matrix runs on its transpose: the same count either way.
        assert_eq!(
            newton_schulz_flops(1_024.0, 8_192.0, 1.0),
            newton_schulz_flops(8_192.0, 1_024.0, 1.0)
        );
        // 1,024 × 8,192: 4·1,024²·8,192 + 2·1,024³.
        assert_eq!(
            newton_schulz_flops(1_024.0, 8_192.0, 1.0),
            4.0 * 1_024f64.powi(2) * 8_192.0 + 2.0 * 1_024f64.powi(3)
        );
    }

    #[test]
    fn a_matrix_keeps_its_master_and_one_moment() {
        assert_eq!(
            matrix_state_bytes(MasterWeights::Fp32, OptimizerStates::Fp32),
            8.0
        );
    }
}
