//! Sizing a model for the inference it will serve (Sardana, Portes, Doubov and Frankle,
//! "Beyond Chinchilla-Optimal: Accounting for Inference in Language Model Scaling Laws", ICML
//! 2024, arXiv:2401.00448, §2): at a loss `ℓ`, the model `(N, D_tr)` that minimises its
//! lifetime FLOPs
//!
//! `6·N·D_tr + 2·N·D_inf`  subject to  `L(N, D_tr) = ℓ`,
//!
//! six FLOPs a parameter for each training token and two for each token it serves (the
//! forward alone). On the loss law `L = E + A/N^α + B/D^β` the constraint fixes the tokens,
//! `D_tr(N) = (B / (ℓ − E − A/N^α))^(1/β)` ([`LossLaw::tokens_for_loss`]), so the optimum is a
//! one-dimensional minimum over `N`, from the smallest model whose floor is below `ℓ` upward;
//! it is found here by a golden-section search over `ln N` (the cost is unimodal there: it
//! falls from +∞ at the floor and grows like `N` for large ones). With no inference the
//! optimum is the compute-optimal model at that loss (Hoffmann et al. 2022's), and as `D_inf`
//! grows it moves to smaller models trained on more tokens: the paper's result, and Llama 3's
//! 8B sibling trained far past its compute-optimal tokens because it was meant to be cheap to
//! serve.
//!
//! The paper's worked numbers, reproduced in the tests on the constants it used (Hoffmann et
//! al.'s fit with α = 0.336, β = 0.283): a 30B-Chinchilla-quality model serving 10^13 tokens is
//! best trained as 13.6 B parameters on 2.84× the data, 28 % fewer lifetime FLOPs; a 13B
//! model's quality serving 2 T tokens as 7 B on more data, 1.7·10^22 FLOPs (17 %) saved.

use crate::laws::LossLaw;

/// A model sized for its lifetime at one loss.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Lifetime {
    /// Parameters `N`.
    pub params: f64,
    /// Training tokens `D_tr`.
    pub tokens: f64,
    /// `6·N·D_tr`.
    pub train_flops: f64,
    /// `2·N·D_inf`.
    pub inference_flops: f64,
}

impl Lifetime {
    /// The model of `params` trained on `tokens`, serving `inference_tokens`.
    pub fn of(params: f64, tokens: f64, inference_tokens: f64) -> Lifetime {
        Lifetime {
            params,
            tokens,
            train_flops: 6.0 * params * tokens,
            inference_flops: 2.0 * params * inference_tokens,
        }
    }

    /// Training and inference FLOPs together.
    pub fn total_flops(&self) -> f64 {
        self.train_flops + self.inference_flops
    }
}

/// The golden-section search's bracket of `ln N` at the end: a relative 1e-12 in `N`.
const TOLERANCE: f64 = 1e-12;

/// The largest model the search considers, parameters: far past any a loss law was fitted on.
const MOST_PARAMS: f64 = 1e20;

/// The model of least lifetime FLOPs at loss `loss` serving `inference_tokens`, under `law`
/// (its plain form: no repetition); `None` where no model reaches `loss`.
pub fn lifetime_optimal(law: &LossLaw, loss: f64, inference_tokens: f64) -> Option<Lifetime> {
    let reducible = loss - law.e;
    if !(reducible > 0.0 && inference_tokens >= 0.0 && inference_tokens.is_finite()) {
        return None;
    }
    // The smallest model whose floor E + A/N^α is below the loss: A/N^α = ℓ − E.
    let smallest = (law.a / reducible).powf(1.0 / law.alpha);
    let cost = |ln_n: f64| {
        let n = ln_n.exp();
        match law.tokens_for_loss(n, loss) {
            Some(d) if d.is_finite() => Lifetime::of(n, d, inference_tokens).total_flops(),
            _ => f64::INFINITY,
        }
    };
    let (lo, hi) = (smallest.ln(), MOST_PARAMS.ln());
    if lo >= hi {
        return None;
    }
    let ln_n = crate::numeric::golden_section(lo, hi, TOLERANCE, cost);
    let n = ln_n.exp();
    let d = law.tokens_for_loss(n, loss)?;
    Some(Lifetime::of(n, d, inference_tokens))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The constants Sardana et al. use: Hoffmann et al.'s fit with α = 0.336 and β = 0.283,
    /// which reproduce every worked number the paper states.
    fn sardana() -> LossLaw {
        LossLaw {
            e: 1.69,
            a: 406.4,
            b: 410.7,
            alpha: 0.336,
            beta: 0.283,
            ..LossLaw::default()
        }
    }

    /// The loss of the compute-optimal model of `n` parameters ("`n`-Chinchilla-quality"):
    /// its tokens from the optimum's condition `α·A/N^α = β·B/D^β`, and the tokens.
    fn chinchilla(law: &LossLaw, n: f64) -> (f64, f64) {
        let d = (law.beta * law.b * n.powf(law.alpha) / (law.alpha * law.a)).powf(1.0 / law.beta);
        (law.loss(n, d), d)
    }

    #[test]
    fn a_30b_chinchilla_quality_model_serving_ten_trillion_tokens_is_13_6b_on_2_84_times_the_data()
    {
        // Sardana et al., abstract and §2: "train a 13.6B model on 2.84× the data", 28 %
        // fewer lifetime FLOPs.
        let law = sardana();
        let (loss, d_chin) = chinchilla(&law, 30e9);
        let best = lifetime_optimal(&law, loss, 1e13).unwrap();
        assert!(
            (best.params / 13.6e9 - 1.0).abs() < 0.005,
            "{}",
            best.params
        );
        assert!((best.tokens / d_chin / 2.84 - 1.0).abs() < 0.005);
        let chin = Lifetime::of(30e9, d_chin, 1e13);
        let saving = 1.0 - best.total_flops() / chin.total_flops();
        assert!((saving - 0.28).abs() < 0.005, "{saving}");
    }

    #[test]
    fn a_13b_model_serving_two_trillion_tokens_is_better_a_7b_saving_1_7e22_flops() {
        // Figure 1's caption: "reduce their total compute by 1.7 × 10^22 FLOPs (17%) by
        // instead training a 7B model on more data".
        let law = sardana();
        let (loss, d_chin) = chinchilla(&law, 13e9);
        let best = lifetime_optimal(&law, loss, 2e12).unwrap();
        assert!((best.params / 7e9 - 1.0).abs() < 0.01, "{}", best.params);
        let saved = Lifetime::of(13e9, d_chin, 2e12).total_flops() - best.total_flops();
        assert!((saved / 1.7e22 - 1.0).abs() < 0.01, "{saved}");
    }

    #[test]
    fn without_inference_the_optimum_is_the_compute_optimal_model_and_more_inference_moves_it_smaller(
    ) {
        let law = sardana();
        let (loss, d_chin) = chinchilla(&law, 30e9);
        let none = lifetime_optimal(&law, loss, 0.0).unwrap();
        assert!((none.params / 30e9 - 1.0).abs() < 1e-6, "{}", none.params);
        assert!((none.tokens / d_chin - 1.0).abs() < 1e-6);
        // Each tenfold of inference: a smaller model on more tokens, at the same loss.
        let mut last = none;
        for d_inf in [1e11, 1e12, 1e13, 1e14] {
            let next = lifetime_optimal(&law, loss, d_inf).unwrap();
            assert!(next.params < last.params && next.tokens > last.tokens);
            assert!((law.loss(next.params, next.tokens) - loss).abs() < 1e-9);
            last = next;
        }
        // A loss no model reaches has no optimum.
        assert_eq!(lifetime_optimal(&law, 1.6, 1e12), None);
    }
}
