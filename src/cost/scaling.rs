//! The scaling law: predicted loss from parameters N and training tokens D, and what follows
//! from it (the loss floor of a model, the tokens a model needs to reach a target, and the
//! compute-optimal split of a budget).
//!
//! The law is the Chinchilla form `L(N, D) = E + A / N^α + B / D^β` (Hoffmann et al., NeurIPS
//! 2022, eq. 2). The default constants are the refit of Besiroglu, Erdil, Barnett and You,
//! "Chinchilla Scaling: A replication attempt", arXiv:2404.10102 (2024), rounded as SPEC.md §3
//! gives them.

use serde::{Deserialize, Serialize};

use crate::error::{check_numbers, Result};

/// The five constants of `L(N, D) = E + A / N^α + B / D^β`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LossLaw {
    /// Irreducible loss E (nats per token).
    pub e: f64,
    /// Parameter coefficient A.
    pub a: f64,
    /// Data coefficient B.
    pub b: f64,
    /// Parameter exponent α.
    pub alpha: f64,
    /// Data exponent β.
    pub beta: f64,
}

/// The published sets of constants a user can start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossLawPreset {
    /// Besiroglu et al. 2024, rounded as SPEC.md gives them (the brief's default):
    /// E = 1.82, A = 482, B = 2,085, α = 0.348, β = 0.366.
    Besiroglu,
    /// Besiroglu et al. 2024, unrounded (arXiv:2404.10102, Table 1):
    /// E = 1.8172, A = 482.01, B = 2085.43, α = 0.3478, β = 0.3658.
    BesirogluUnrounded,
    /// Hoffmann et al. 2022, Approach 3: E = 1.69, A = 406.4, B = 410.7, α = 0.34, β = 0.28.
    Hoffmann,
}

impl LossLawPreset {
    /// All presets, in the order the CLI lists them.
    pub const ALL: [LossLawPreset; 3] = [
        LossLawPreset::Besiroglu,
        LossLawPreset::BesirogluUnrounded,
        LossLawPreset::Hoffmann,
    ];

    /// The name a user types.
    pub fn name(self) -> &'static str {
        match self {
            LossLawPreset::Besiroglu => "besiroglu",
            LossLawPreset::BesirogluUnrounded => "besiroglu-unrounded",
            LossLawPreset::Hoffmann => "hoffmann",
        }
    }

    /// The preset called `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The constants of this preset.
    pub fn law(self) -> LossLaw {
        match self {
            LossLawPreset::Besiroglu => LossLaw {
                e: 1.82,
                a: 482.0,
                b: 2085.0,
                alpha: 0.348,
                beta: 0.366,
            },
            LossLawPreset::BesirogluUnrounded => LossLaw {
                e: 1.8172,
                a: 482.01,
                b: 2085.43,
                alpha: 0.3478,
                beta: 0.3658,
            },
            LossLawPreset::Hoffmann => LossLaw {
                e: 1.69,
                a: 406.4,
                b: 410.7,
                alpha: 0.34,
                beta: 0.28,
            },
        }
    }
}

impl Default for LossLaw {
    fn default() -> Self {
        LossLawPreset::Besiroglu.law()
    }
}

impl LossLaw {
    /// Checks every constant: all finite, E ≥ 0, A, B, α, β > 0.
    pub fn validate(&self, prefix: &str) -> Result<()> {
        let fields = [
            ("e", self.e, true),
            ("a", self.a, false),
            ("b", self.b, false),
            ("alpha", self.alpha, false),
            ("beta", self.beta, false),
        ];
        check_numbers(prefix, &fields, f64::INFINITY)
    }

    /// Predicted loss `L(N, D) = E + A / N^α + B / D^β` for `n` parameters trained on `d` tokens.
    pub fn loss(&self, n: f64, d: f64) -> f64 {
        self.loss_floor(n) + self.data_term(d)
    }

    /// The loss a model of `n` parameters approaches with unlimited data: `E + A / N^α`.
    /// A model whose floor is above the target can never reach it.
    pub fn loss_floor(&self, n: f64) -> f64 {
        self.e + self.a / n.powf(self.alpha)
    }

    /// The data term `B / D^β` of the law.
    pub fn data_term(&self, d: f64) -> f64 {
        self.b / d.powf(self.beta)
    }

    /// The fewest tokens (continuous) with which `n` parameters reach `target`:
    /// solving `E + A/N^α + B/D^β = target` for D gives `D = (B / (target − E − A/N^α))^(1/β)`.
    /// `None` when the loss floor is at or above the target (no number of tokens suffices).
    pub fn tokens_for_loss(&self, n: f64, target: f64) -> Option<f64> {
        let headroom = target - self.loss_floor(n);
        if headroom > 0.0 {
            Some((self.b / headroom).powf(1.0 / self.beta))
        } else {
            None
        }
    }

    /// The compute-optimal parameters for a budget of `c` FLOPs under `C = 6·N·D`
    /// (Hoffmann et al. 2022, eq. 4): minimising `L` subject to `6ND = C` gives
    /// `N_opt = G·(C/6)^(β/(α+β))` with `G = (αA / (βB))^(1/(α+β))`, and `D_opt = (C/6)/N_opt`.
    pub fn compute_optimal_params(&self, c: f64) -> f64 {
        let g = (self.alpha * self.a / (self.beta * self.b)).powf(1.0 / (self.alpha + self.beta));
        g * (c / 6.0).powf(self.beta / (self.alpha + self.beta))
    }
}

/// The compute-optimal model for a budget, in whole parameters and tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ComputeOptimal {
    /// `N_opt`, rounded to a whole parameter.
    pub params: u64,
    /// `D_opt = (C/6) / N_opt`, rounded to a whole token.
    pub tokens: u64,
    /// Predicted loss at (`params`, `tokens`).
    pub loss: f64,
}

impl ComputeOptimal {
    /// The compute-optimal split of `budget_flops` under `law` (see
    /// [`LossLaw::compute_optimal_params`]).
    pub fn for_budget(law: &LossLaw, budget_flops: f64) -> Self {
        let n = law.compute_optimal_params(budget_flops);
        let d = budget_flops / 6.0 / n;
        let (params, tokens) = (n.round() as u64, d.round() as u64);
        ComputeOptimal {
            params,
            tokens,
            loss: law.loss(params as f64, tokens as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        ((a - b) / b).abs() <= rel
    }

    #[test]
    fn loss_is_the_sum_of_three_terms_worked_by_hand() {
        // N = D = 1e12 under E=1.82, A=482, B=2085, α=0.348, β=0.366:
        // 1e12^0.348 = 10^4.176 = 14,996.8; 482 / 14,996.8 = 0.032140
        // 1e12^0.366 = 10^4.392 = 24,660.3; 2085 / 24,660.3 = 0.084549
        let law = LossLaw::default();
        let l = law.loss(1e12, 1e12);
        assert!(close(l, 1.82 + 0.032140 + 0.084549, 1e-5), "{l}");
    }

    #[test]
    fn tokens_for_loss_inverts_the_law() {
        let law = LossLaw::default();
        let n = 70_553_706_496.0;
        let d = law.tokens_for_loss(n, 1.955).unwrap();
        assert!(close(law.loss(n, d), 1.955, 1e-12));
    }

    #[test]
    fn a_model_whose_floor_is_above_the_target_never_reaches_it() {
        let law = LossLaw::default();
        // Llama 3 8B: floor = 1.82 + 482 / 8.03e9^0.348 = 1.9924 > 1.955.
        assert!(law.loss_floor(8_030_261_248.0) > 1.99);
        assert_eq!(law.tokens_for_loss(8_030_261_248.0, 1.955), None);
    }

    #[test]
    fn the_compute_optimal_point_minimises_loss_along_the_budget() {
        let law = LossLaw::default();
        let c = 2.1e24;
        let n = law.compute_optimal_params(c);
        let at = |n: f64| law.loss(n, c / (6.0 * n));
        assert!(at(n) < at(n * 1.01) && at(n) < at(n / 1.01));
    }

    #[test]
    fn the_default_budget_s_compute_optimal_model_has_about_140b_parameters() {
        // G = (0.348·482 / (0.366·2085))^(1/0.714) = 0.119808; (C/6)^(0.366/0.714) with
        // C = 2.1000093696e24 gives 1.171680e12; N_opt = 1.403767e11, D_opt = 2.493302e12,
        // loss 1.944167 (worked in Python).
        let opt = ComputeOptimal::for_budget(&LossLaw::default(), 2.100_009_369_6e24);
        assert!(
            close(opt.params as f64, 1.403_767e11, 1e-6),
            "{}",
            opt.params
        );
        assert!(
            close(opt.tokens as f64, 2.493_302e12, 1e-6),
            "{}",
            opt.tokens
        );
        assert!((opt.loss - 1.944_167).abs() < 1e-6, "{}", opt.loss);
        let c = 6.0 * opt.params as f64 * opt.tokens as f64;
        assert!(close(c, 2.100_009_369_6e24, 1e-9));
    }

    #[test]
    fn presets_round_trip_their_names_and_validate() {
        for p in LossLawPreset::ALL {
            assert_eq!(LossLawPreset::from_name(p.name()), Some(p));
            p.law().validate("loss_law.").unwrap();
        }
    }

    #[test]
    fn a_negative_or_non_finite_constant_is_refused_by_name() {
        let mut law = LossLaw {
            alpha: -0.3,
            ..LossLaw::default()
        };
        let e = law.validate("loss_law.").unwrap_err().to_string();
        assert!(e.contains("loss_law.alpha") && e.contains("-0.3"), "{e}");
        law.alpha = f64::NAN;
        assert!(law.validate("").is_err());
    }
}
