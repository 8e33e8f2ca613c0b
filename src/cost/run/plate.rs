//! Training time under the plate model: FLOPs by `6·N·D` at the brief's assumed MFU.
//!
//! `6·N·D` counts the forward (2 FLOPs per parameter per token) and backward (4) matrix
//! products, and nothing else (Kaplan et al. 2020 §2.1; Hoffmann et al. 2022 §3). SPEC.md §4
//! lists what it leaves out: attention FLOPs, recomputation, communication and failures.

use crate::units::SECONDS_PER_DAY;

/// Training FLOPs for `n` parameters on `d` tokens: `C = 6·N·D`.
pub fn training_flops(n: f64, d: f64) -> f64 {
    6.0 * n * d
}

/// Days to train `n` parameters on `d` tokens on a cluster that sustains
/// `cluster_flops_per_second` (GPUs × peak × MFU; SPEC.md §3): `6·N·D / (GPUs × peak × MFU ×
/// 86,400)`.
pub fn days(cluster_flops_per_second: f64, n: f64, d: f64) -> f64 {
    training_flops(n, d) / (cluster_flops_per_second * SECONDS_PER_DAY)
}

/// The most tokens (continuous) `n` parameters can see within a compute budget of
/// `budget_flops` (the brief's days at its pace): `D_max = C / (6·N)`.
pub fn max_tokens(budget_flops: f64, n: f64) -> f64 {
    budget_flops / (6.0 * n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;

    #[test]
    fn the_starting_plan_takes_about_91_days() {
        // 6 × 70,553,706,496 × 15e12 / (2048 × 989e12 × 0.4 × 86,400) = 90.7115 days.
        let d = days(
            Brief::default().cluster_flops_per_second(),
            70_553_706_496.0,
            15e12,
        );
        assert!((d - 90.711_503_623).abs() < 1e-6, "{d}");
    }

    #[test]
    fn max_tokens_uses_exactly_the_brief_s_days() {
        let b = Brief::default();
        let n = 405_853_388_800.0;
        let d = days(
            b.cluster_flops_per_second(),
            n,
            max_tokens(b.budget_flops(), n),
        );
        assert!((d - 30.0).abs() < 1e-12);
    }

    #[test]
    fn days_are_linear_in_tokens() {
        let b = Brief::default();
        let one = days(b.cluster_flops_per_second(), 8e9, 1e12);
        assert!((days(b.cluster_flops_per_second(), 8e9, 3e12) - 3.0 * one).abs() < 1e-12 * one);
    }
}
