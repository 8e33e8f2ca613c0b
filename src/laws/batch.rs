//! Batch-size laws: the global batch (and the peak learning rate) a run of `N` parameters on
//! `D` tokens should use, fitted by grid searches over small models. A plan aims its global
//! batch at the law's optimum instead of a fixed target when the brief names one
//! (`--batch-law`); the default, [`BatchLaw::Fixed`], keeps the brief's own target (16 Mi
//! tokens), so every pinned answer stays.
//!
//! - **DeepSeek LLM** (DeepSeek-AI, "DeepSeek LLM: Scaling Open-Source Language Models with
//!   Longtermism", arXiv:2401.02954, §3.1, eq. 1): `η_opt = 0.3118 · C^−0.1250` and
//!   `B_opt = 0.2920 · C^0.3271` tokens, with the compute budget `C = M·D` in the paper's
//!   convention: `M = 72·n_layer·d_model² + 12·n_layer·d_model·l_seq` non-embedding FLOPs a
//!   token (§3.2, eq. 2), generalised here as `6·N_ne + 12·n_layer·d_model·l_seq` (exact for
//!   its 7B's blocks; its grouped-query 67B has `6·N_ne = 61.9·n_layer·d_model²`, where the
//!   paper's formula gives 5,043 sequences and 3.12e−4 against this 4,830 and 3.17e−4)
//!   with `N_ne` the matrices a token multiplies outside the embedding and the head
//!   ([`LawInputs::flops_per_token`]). Fitted on budgets "ranging from 1e17 to 2e19" (§3.1);
//!   the paper's own 7B and 67B models (2 T tokens at 4,096) took their batch and learning
//!   rate from it: 2,304 and 4,608 sequences of 4,096, 4.2e−4 and 3.2e−4 (Table 2).
//! - **Step Law** (StepFun, "Predictable Scale: Part I — Optimal Hyperparameter Scaling Law in
//!   Large Language Model Pretraining", arXiv:2503.04715, eq. 3–4): `η_opt = 1.79 · N^−0.713 ·
//!   D^0.307` and `B_opt = 0.58 · D^0.571` tokens, with `N` the non-embedding parameters and
//!   `D` the training tokens (the authors' fit multiplies the batch in sequences by their
//!   2,048 tokens); fitted on their released dense runs, 215 M to 1.07 B non-embedding
//!   parameters on 4 B to 100 B tokens.
//!
//! The laws are fitted where the batch's cost in tokens is flat near its optimum: a batch
//! within a factor of about 1.5 of it trains as well (DeepSeek LLM's Figure 3 band, the
//! "near-optimal" region of Step Law's Figure 4), which is what the brief's tolerance
//! (a quarter either side by default) asks of a layout's whole rounds of micro-batches.

use crate::format::{count, general};

/// How far from a law's optimum a batch trains about as well, as factors of it: DeepSeek LLM
/// fitted its law to every run within 0.25 % of the best loss (§3.1), a band its Figure 3 shows
/// about 1.5 times either way of the fit, as Step Law's Figure 4 shows a flat region around its
/// optimum. `--sensitivity` moves the batch a search aims at across it
/// ([`crate::brief::Brief::batch_law_scale`]).
pub const NEAR_OPTIMAL: (f64, f64) = (2.0 / 3.0, 1.5);

/// A law that sets a run's global batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BatchLaw {
    /// The brief's own target (`batch_target_tokens`, 16 Mi tokens by default).
    #[default]
    Fixed,
    /// DeepSeek LLM's law in the compute budget (arXiv:2401.02954, eq. 1).
    DeepSeek,
    /// StepFun's Step Law in the training tokens (arXiv:2503.04715).
    Step,
}

/// Which run a law's batch is sized for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SizedFor {
    /// The plan's own tokens (`check`, a launcher's export).
    Plan,
    /// The fewest tokens that reach the brief's loss target (a search's shape).
    LossTarget,
    /// The most tokens the brief's budget trains, for a shape that never reaches the target.
    Budget,
}

/// What a batch law reads of a run: its non-embedding parameters, layers, width and sequence,
/// and its tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LawInputs {
    /// Parameters a token multiplies outside the input embedding and the output head, `N_ne`
    /// (the active ones, for a mixture of experts).
    pub params: f64,
    /// Layers `n_layer`.
    pub layers: f64,
    /// Width `d_model`.
    pub hidden: f64,
    /// Training sequence `l_seq`, tokens.
    pub seq_len: f64,
    /// Training tokens `D`.
    pub tokens: f64,
}

impl LawInputs {
    /// DeepSeek LLM's non-embedding FLOPs a token, `M = 6·N_ne + 12·n_layer·d_model·l_seq`
    /// (arXiv:2401.02954, §3.2 eq. 2, which writes `72·n_layer·d_model²` for `6·N_ne`):
    /// the matrices' forward and backward and the attention's scores, without the embedding
    /// and the head.
    pub fn flops_per_token(&self) -> f64 {
        6.0 * self.params + 12.0 * self.layers * self.hidden * self.seq_len
    }

    /// DeepSeek LLM's compute budget `C = M·D`.
    pub fn compute(&self) -> f64 {
        self.flops_per_token() * self.tokens
    }
}

/// The AdamW settings a law's learning rate was fitted with, where its source states them: a
/// launcher that writes the law's learning rate writes these beside it, since the optimum
/// moves with them (a launcher's own defaults differ: Megatron-LM's `--adam-beta2` is 0.999
/// and its `--weight-decay` 0.01).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamW {
    /// The first moment's decay, `β1`.
    pub beta1: f64,
    /// The second moment's decay, `β2`.
    pub beta2: f64,
    /// Decoupled weight decay, `λ`.
    pub weight_decay: f64,
}

/// The runs a batch law was fitted on, in its own variable, and whose they were.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchRange {
    /// The quantity the law reads (`compute` in FLOPs, `tokens`).
    pub what: &'static str,
    /// Its smallest and largest value fitted.
    pub span: (f64, f64),
    /// Whose runs.
    pub source: &'static str,
}

impl BatchLaw {
    /// Every law, in the order `--help` lists them.
    pub const ALL: [BatchLaw; 3] = [BatchLaw::Fixed, BatchLaw::DeepSeek, BatchLaw::Step];

    /// The name `--batch-law` takes.
    pub fn name(self) -> &'static str {
        match self {
            BatchLaw::Fixed => "fixed",
            BatchLaw::DeepSeek => "deepseek",
            BatchLaw::Step => "step",
        }
    }

    /// The law of `name`, if there is one.
    pub fn from_name(name: &str) -> Option<BatchLaw> {
        BatchLaw::ALL.into_iter().find(|l| l.name() == name)
    }

    /// Whether the law is the brief's fixed target.
    pub fn is_fixed(&self) -> bool {
        *self == BatchLaw::Fixed
    }

    /// The optimal global batch in tokens for the run `x`; `None` for [`BatchLaw::Fixed`].
    ///
    /// - DeepSeek: `0.2920 · C^0.3271`, `C = M·D`.
    /// - Step: `0.58 · D^0.571`.
    pub fn optimal_batch(self, x: &LawInputs) -> Option<f64> {
        match self {
            BatchLaw::Fixed => None,
            BatchLaw::DeepSeek => Some(0.2920 * x.compute().powf(0.3271)),
            BatchLaw::Step => Some(0.58 * x.tokens.powf(0.571)),
        }
    }

    /// The optimal peak learning rate for the run `x` (AdamW, as each paper trained);
    /// `None` for [`BatchLaw::Fixed`].
    ///
    /// - DeepSeek: `0.3118 · C^−0.1250`.
    /// - Step: `1.79 · N^−0.713 · D^0.307`.
    pub fn optimal_learning_rate(self, x: &LawInputs) -> Option<f64> {
        match self {
            BatchLaw::Fixed => None,
            BatchLaw::DeepSeek => Some(0.3118 * x.compute().powf(-0.1250)),
            BatchLaw::Step => Some(1.79 * x.params.powf(-0.713) * x.tokens.powf(0.307)),
        }
    }

    /// The AdamW settings the law's learning rate was fitted with, where its source states
    /// them: DeepSeek LLM's `β1 = 0.9, β2 = 0.95`, weight decay 0.1 (arXiv:2401.02954,
    /// §2.3). Step Law's released runs and code (github.com/step-law/steplaw) name no betas or
    /// decay, so `None`, as for [`BatchLaw::Fixed`]: the launcher's own stand.
    pub fn adamw(self) -> Option<AdamW> {
        match self {
            BatchLaw::DeepSeek => Some(AdamW {
                beta1: 0.9,
                beta2: 0.95,
                weight_decay: 0.1,
            }),
            BatchLaw::Fixed | BatchLaw::Step => None,
        }
    }

    /// How the optimal batch and learning rate grow with a run's tokens for one model, the
    /// exponents `(b, l)` of `B ∝ D^b` and `η ∝ D^l`: DeepSeek's `C = M·D` with `M` fixed gives
    /// `(0.3271, −0.1250)`, Step Law's `(0.571, 0.307)`; `None` for [`BatchLaw::Fixed`].
    pub fn token_exponents(self) -> Option<(f64, f64)> {
        match self {
            BatchLaw::Fixed => None,
            BatchLaw::DeepSeek => Some((0.3271, -0.1250)),
            BatchLaw::Step => Some((0.571, 0.307)),
        }
    }

    /// The runs the law was fitted on; `None` for [`BatchLaw::Fixed`].
    pub fn fitted(self) -> Option<BatchRange> {
        match self {
            BatchLaw::Fixed => None,
            BatchLaw::DeepSeek => Some(BatchRange {
                what: "compute",
                span: (1e17, 2e19),
                source: "DeepSeek LLM's grid searches, arXiv:2401.02954 §3.1",
            }),
            BatchLaw::Step => Some(BatchRange {
                what: "tokens",
                span: (4e9, 100e9),
                source: "Step Law's released runs, arXiv:2503.04715",
            }),
        }
    }

    /// The law's variable for the run `x`: its compute `M·D` or its tokens.
    pub fn variable(self, x: &LawInputs) -> f64 {
        match self {
            BatchLaw::DeepSeek => x.compute(),
            _ => x.tokens,
        }
    }

    /// The words a report gives when the run `x` is beyond the law's fitted range:
    /// `deepseek extrapolates: a budget of 8.49e22 FLOPs (above 2e19); fitted on …`; `None`
    /// inside it.
    pub fn extrapolation(self, x: &LawInputs) -> Option<String> {
        self.extrapolation_of(self.variable(x))
    }

    /// [`BatchLaw::extrapolation`] of a run whose law variable ([`BatchLaw::variable`]) is `v`.
    pub fn extrapolation_of(self, v: f64) -> Option<String> {
        let range = self.fitted()?;
        let (lo, hi) = range.span;
        let side = if v > hi {
            ("above", hi)
        } else if v < lo {
            ("below", lo)
        } else {
            return None;
        };
        let (value, bound, lo, hi, unit) = match range.what {
            "compute" => (
                general_sci(v),
                general_sci(side.1),
                general_sci(lo),
                general_sci(hi),
                "FLOPs",
            ),
            _ => (count(v), count(side.1), count(lo), count(hi), "tokens"),
        };
        Some(format!(
            "{} extrapolates: {} {value} {unit} ({} {bound}); fitted on {lo}–{hi} {unit} ({})",
            self.name(),
            if range.what == "compute" {
                "a budget of"
            } else {
                "a run of"
            },
            side.0,
            range.source
        ))
    }
}

/// `3.67e25`-style scientific notation with three significant figures.
fn general_sci(x: f64) -> String {
    let s = format!("{x:.2e}");
    // `3.67e25` as Rust writes it; a mantissa of whole tens (`1.00e17`) is shortened.
    match s.split_once('e') {
        Some((m, e)) => {
            let m = m.trim_end_matches('0').trim_end_matches('.');
            format!("{m}e{e}")
        }
        None => general(x),
    }
}

impl std::fmt::Display for BatchLaw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for BatchLaw {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for BatchLaw {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        BatchLaw::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown batch law {name:?}: one of fixed, deepseek, step"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DeepSeek LLM's Table 2 models on 2 T tokens of sequences of 4,096, with their
    /// non-embedding matrices counted from their configurations: 7B, 30 layers of 4,096 (32
    /// heads, an MLP of 11,008); 67B, 95 layers of 8,192 (64 query heads, 8 key-value heads of
    /// 128, an MLP of 22,016).
    fn deepseek(layers: f64, hidden: f64, per_layer: f64) -> LawInputs {
        LawInputs {
            params: layers * per_layer,
            layers,
            hidden,
            seq_len: 4096.0,
            tokens: 2e12,
        }
    }

    fn deepseek_7b() -> LawInputs {
        let h = 4096.0;
        deepseek(30.0, h, 4.0 * h * h + 3.0 * h * 11008.0)
    }

    fn deepseek_67b() -> LawInputs {
        let h = 8192.0;
        deepseek(95.0, h, 2.0 * h * h + 2.0 * h * 1024.0 + 3.0 * h * 22016.0)
    }

    #[test]
    fn deepseek_llm_took_its_batches_and_learning_rates_from_its_law() {
        // Table 2: 7B at 2,304 sequences of 4,096 and 4.2e-4; 67B at 4,608 and 3.2e-4. By
        // hand for 7B: N_ne = 30 × 202.4 M = 6.07 B, M = 6·N_ne + 12·30·4096·4096 = 4.248e10,
        // C = 8.496e22, B = 0.2920·C^0.3271 = 9.24 M tokens (2,255 sequences; the paper
        // rounds to 2,304 = 9·256), η = 0.3118·C^−0.125 = 4.24e-4.
        let b7 = deepseek_7b();
        assert!((b7.flops_per_token() / 4.248e10 - 1.0).abs() < 1e-3);
        let batch = BatchLaw::DeepSeek.optimal_batch(&b7).unwrap() / 4096.0;
        assert!((batch / 2304.0 - 1.0).abs() < 0.05, "{batch}");
        let lr = BatchLaw::DeepSeek.optimal_learning_rate(&b7).unwrap();
        assert!((lr / 4.2e-4 - 1.0).abs() < 0.03, "{lr}");
        let b67 = deepseek_67b();
        let batch = BatchLaw::DeepSeek.optimal_batch(&b67).unwrap() / 4096.0;
        assert!((batch / 4608.0 - 1.0).abs() < 0.05, "{batch}");
        let lr = BatchLaw::DeepSeek.optimal_learning_rate(&b67).unwrap();
        assert!((lr / 3.2e-4 - 1.0).abs() < 0.03, "{lr}");
    }

    #[test]
    fn step_law_at_its_largest_run() {
        // The paper's headline run, 1 B (2^30) non-embedding parameters on 100 B tokens, by
        // hand: η = 1.79 · 2^30^−0.713 · 1e11^0.307 = 1.5517e-3, B = 0.58 · 1e11^0.571 =
        // 1.1077 M tokens (541 sequences of its 2,048).
        let x = LawInputs {
            params: 1_073_741_824.0,
            layers: 0.0,
            hidden: 0.0,
            seq_len: 2048.0,
            tokens: 1e11,
        };
        let lr = BatchLaw::Step.optimal_learning_rate(&x).unwrap();
        assert!((lr / 1.5517e-3 - 1.0).abs() < 1e-4, "{lr}");
        let b = BatchLaw::Step.optimal_batch(&x).unwrap();
        assert!((b / 1.1077e6 - 1.0).abs() < 1e-4, "{b}");
        assert_eq!(BatchLaw::Step.extrapolation(&x), None);
    }

    #[test]
    fn the_token_exponents_are_the_laws_own_scaling_in_tokens() {
        for law in [BatchLaw::DeepSeek, BatchLaw::Step] {
            let x = deepseek_7b();
            let y = LawInputs {
                tokens: 5.0 * x.tokens,
                ..x
            };
            let (b, l) = law.token_exponents().unwrap();
            let ratio = |f: fn(BatchLaw, &LawInputs) -> Option<f64>| {
                f(law, &y).unwrap() / f(law, &x).unwrap()
            };
            assert!((ratio(BatchLaw::optimal_batch) / 5f64.powf(b) - 1.0).abs() < 1e-12);
            assert!((ratio(BatchLaw::optimal_learning_rate) / 5f64.powf(l) - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn the_fixed_law_sets_nothing_and_names_round_trip() {
        let x = deepseek_7b();
        assert_eq!(BatchLaw::Fixed.optimal_batch(&x), None);
        assert_eq!(BatchLaw::Fixed.optimal_learning_rate(&x), None);
        for law in BatchLaw::ALL {
            assert_eq!(BatchLaw::from_name(law.name()), Some(law));
        }
        assert_eq!(BatchLaw::from_name("chinchilla"), None);
    }

    #[test]
    fn a_run_beyond_the_fitted_budgets_is_said_to_extrapolate() {
        let x = deepseek_7b();
        let words = BatchLaw::DeepSeek.extrapolation(&x).unwrap();
        assert!(
            words.starts_with("deepseek extrapolates: a budget of 8.49e22 FLOPs (above 2e19); fitted on 1e17–2e19 FLOPs"),
            "{words}"
        );
        let small = LawInputs { tokens: 1e6, ..x };
        assert!(BatchLaw::DeepSeek.extrapolation(&small).is_some());
        let inside = LawInputs { tokens: 50e9, ..x };
        assert_eq!(BatchLaw::Step.extrapolation(&inside), None);
    }
}
