//! The scaling law: predicted loss from parameters N and training tokens D, and what follows
//! from it (the loss floor of a model, the tokens a model needs to reach a target, and the
//! compute-optimal split of a budget).
//!
//! The law is the Chinchilla form `L(N, D) = E + A / N^α + B / D^β` (Hoffmann et al., NeurIPS
//! 2022, eq. 2). The default constants are the refit of Besiroglu, Erdil, Barnett and You,
//! "Chinchilla Scaling: A replication attempt", arXiv:2404.10102 (2024), rounded as SPEC.md §3
//! gives them.
//!
//! A law may also say what repeated data and excess parameters are worth ([`Repetition`]):
//! the data-constrained law of Muennighoff et al., "Scaling Data-Constrained Language Models",
//! NeurIPS 2023, eq. 5, which grades a run on `U` unique tokens by its effective tokens `D'`
//! and parameters `N'` ([`LossLaw::effective`]). Without repetition the law is the plain form,
//! computed as it always was.
//!
//! A law may also say what experts are worth ([`ExpertScaling`]): the joint law for mixtures of
//! experts of Ludziejewski et al., "Joint MoE Scaling Laws: Mixture of Experts Can Be Memory
//! Efficient", ICML 2025 (arXiv:2502.05172), eq. 6, in active parameters, tokens and the
//! number of experts. For one model its expansion is fixed, and the law is the Chinchilla form
//! again with constants of that expansion ([`LossLaw::at`]): a dense model is the law at one
//! expert, so dense and MoE models are graded by one law, and every closed form (the floor,
//! the tokens for a target, the compute-optimal split) holds model by model.

use serde::{Deserialize, Serialize};

use crate::error::{check_numbers, Error, Result};
use crate::format::{count, exact, fixed, general};

/// What repeating data and parameters beyond the data's optimum are worth (Muennighoff et al.
/// 2023, eq. 5): a token seen for the `R`-th time after the first epoch adds
/// `e^(−R/R_D*)` of a fresh one, so `D' = U_D + U_D·R_D*·(1 − e^(−R_D/R_D*))` with
/// `U_D = min(D, U)` and `R_D = D/U_D − 1`; parameters past `U_N = min(N, N_opt(U_D))` (the
/// compute-optimal size for the unique tokens, [`LossLaw::params_for_tokens`]) decay alike,
/// `N' = U_N + U_N·R_N*·(1 − e^(−R_N/R_N*))` with `R_N = N/U_N − 1`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repetition {
    /// `R_D*`: repetitions after which repeated tokens are worth `1/e` of fresh ones
    /// (Muennighoff et al.: 15.387756).
    pub r_d: f64,
    /// `R_N*`: the same for parameters beyond the data's compute-optimal size (5.309743).
    pub r_n: f64,
}

/// `1 − e^(−R/R*)`, the worth of `R` repeats in units of `R*` fresh ones, by `expm1` so that a
/// large `R*` keeps its precision (`1 − e^(−x)` rounds to 0 for `x` below 2⁻⁵³).
fn decay(repeats: f64, star: f64) -> f64 {
    -(-repeats / star).exp_m1()
}

/// What a run's tokens and parameters are worth under a law with [`Repetition`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Effective {
    /// `N'`, the parameters the law grades.
    pub params: f64,
    /// `D'`, the tokens the law grades.
    pub tokens: f64,
    /// Passes over the unique tokens, `D / U` (1 or less when nothing is repeated).
    pub epochs: f64,
}

/// What experts are worth under the joint MoE law of Ludziejewski et al. 2025 (eq. 6):
/// `L = E + A·Ê^δ / N_act^(α − γ·ln Ê) + B·Ê^ω / D^(β − ζ·ln Ê)`, written with this crate's
/// positive α and β (the paper writes the exponents as added powers, `α_paper = −α`, and its
/// γ and ζ with the signs kept here), where `Ê` saturates the number of experts `E` (eq. 4,
/// from Clark et al. 2022): `1/Ê = 1/(E − 1 + (1/E_start − 1/E_max)^−1) + 1/E_max`, so that
/// one expert (a dense model) gives `Ê = E_start` and many tend to `E_max`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpertScaling {
    /// δ, how the parameter coefficient scales with `Ê` (−0.2285).
    pub delta: f64,
    /// γ, how the parameter exponent changes with `ln Ê` (0.0098).
    pub gamma: f64,
    /// ω, how the data coefficient scales with `Ê` (0.5529).
    pub omega: f64,
    /// ζ, how the data exponent changes with `ln Ê` (−0.0259).
    pub zeta: f64,
    /// `E_start`, the `Ê` of one expert (2.0732).
    pub e_start: f64,
    /// `E_max`, where more experts stop helping (290.4521).
    pub e_max: f64,
}

impl ExpertScaling {
    /// `Ê` of `experts` (eq. 4): `1/Ê = 1/(E − 1 + (1/E_start − 1/E_max)^−1) + 1/E_max`.
    pub fn saturated(&self, experts: f64) -> f64 {
        let offset = 1.0 / (1.0 / self.e_start - 1.0 / self.e_max);
        1.0 / (1.0 / (experts - 1.0 + offset) + 1.0 / self.e_max)
    }
}

/// What a law grades a model by: its parameters `N` (active ones, for a mixture of experts) and
/// its expansion ([`crate::model::Shape::expansion`], 1 for a dense model), which only a law
/// with [`ExpertScaling`] reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LawSize {
    /// `N`, or `N_act` for a mixture of experts.
    pub params: f64,
    /// Total expert capacity over active, 1 for a dense model.
    pub expansion: f64,
}

impl From<f64> for LawSize {
    /// A dense model of `params` parameters.
    fn from(params: f64) -> Self {
        LawSize {
            params,
            expansion: 1.0,
        }
    }
}

/// The five constants of `L(N, D) = E + A / N^α + B / D^β`, and what repetition and experts
/// are worth.
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
    /// What repeated tokens and excess parameters are worth; `None` for the plain law, which
    /// values every token and parameter fully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition: Option<Repetition>,
    /// What experts are worth; `None` for a law fitted on dense models, which grades a
    /// mixture of experts by its active parameters alone (see
    /// [`crate::plan::limits::law_size`]). With it, the constants above are the law's before
    /// the expansion is applied ([`LossLaw::at`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<ExpertScaling>,
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
    /// Muennighoff et al. 2023's data-constrained fit (their repository's README, "Parametric
    /// Fit": `[a, b, e, α, β, R_D*, R_N*] = [6.255414, 7.3049974, 0.6254804, 0.3526596,
    /// 0.3526596, 15.387756, 5.309743]`, with `A = e^a`, `B = e^b`, `E = e^e`): E ≈ 1.869,
    /// A ≈ 520.8, B ≈ 1487.7, α = β = 0.3527, R_D* = 15.39, R_N* = 5.31.
    Muennighoff,
    /// Ludziejewski et al. 2025, the joint law for mixtures of experts (arXiv:2502.05172,
    /// Appendix B, Table 3; eq. 6): E = 1.3637, A = 35.91, B = 35.98, α = 0.1889,
    /// β = 0.1775, δ = −0.2285, γ = 0.0098, ω = 0.5529, ζ = −0.0259, E_start = 2.0732,
    /// E_max = 290.4521. Fitted on about 280 runs of 79M–2.7B active parameters, up to 32
    /// experts and 0.5B–80B tokens of FineWeb-Edu (GPT-2 tokenizer), so its losses are in
    /// that data's nats, not the other presets'.
    Ludziejewski,
    /// Gadre et al. 2024's over-training law (arXiv:2403.08540, Eq. 4): `L(C, M) = E +
    /// (a·M^η + b·M^−η)·C^−η` in the compute `C = 6ND` and the token multiplier `M = D/N`,
    /// which is the Chinchilla form with `α = β = 2η`, `A = a·6^−η`, `B = b·6^−η`. The paper
    /// prints no constants: these are its Eq. 4 refitted to its default fit set's RedPajama
    /// runs (M = 20 and 320) from the authors' released losses (`data/published/gadre-redpajama.json`; E =
    /// 1.8366, a = 212.24, b = 366.69, η = 0.13643), which predict its 1.4B run at M = 640 and
    /// its 6.9B run at M = 20 within 0.73 %, as the paper reports (0.7 %). Losses are C4-eval
    /// nats with the GPT-NeoX tokenizer. N counts every parameter, embeddings included.
    Gadre,
}

impl LossLawPreset {
    /// All presets, in the order the CLI lists them.
    pub const ALL: [LossLawPreset; 6] = [
        LossLawPreset::Besiroglu,
        LossLawPreset::BesirogluUnrounded,
        LossLawPreset::Hoffmann,
        LossLawPreset::Muennighoff,
        LossLawPreset::Ludziejewski,
        LossLawPreset::Gadre,
    ];

    /// The name a user types.
    pub fn name(self) -> &'static str {
        match self {
            LossLawPreset::Besiroglu => "besiroglu",
            LossLawPreset::BesirogluUnrounded => "besiroglu-unrounded",
            LossLawPreset::Hoffmann => "hoffmann",
            LossLawPreset::Muennighoff => "muennighoff",
            LossLawPreset::Ludziejewski => "ludziejewski",
            LossLawPreset::Gadre => "gadre",
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
                repetition: None,
                experts: None,
            },
            LossLawPreset::BesirogluUnrounded => LossLaw {
                e: 1.8172,
                a: 482.01,
                b: 2085.43,
                alpha: 0.3478,
                beta: 0.3658,
                repetition: None,
                experts: None,
            },
            LossLawPreset::Hoffmann => LossLaw {
                e: 1.69,
                a: 406.4,
                b: 410.7,
                alpha: 0.34,
                beta: 0.28,
                repetition: None,
                experts: None,
            },
            LossLawPreset::Muennighoff => LossLaw {
                e: 0.6254804_f64.exp(),
                a: 6.255414_f64.exp(),
                b: 7.3049974_f64.exp(),
                alpha: 0.3526596,
                beta: 0.3526596,
                repetition: Some(Repetition {
                    r_d: 15.387756,
                    r_n: 5.309743,
                }),
                experts: None,
            },
            LossLawPreset::Ludziejewski => LossLaw {
                e: 1.3637,
                a: 35.91,
                b: 35.98,
                alpha: 0.1889,
                beta: 0.1775,
                repetition: None,
                experts: Some(ExpertScaling {
                    delta: -0.2285,
                    gamma: 0.0098,
                    omega: 0.5529,
                    zeta: -0.0259,
                    e_start: 2.0732,
                    e_max: 290.4521,
                }),
            },
            LossLawPreset::Gadre => {
                // Eq. 4's (E, a, b, η) as refitted ([`LossLawPreset::Gadre`]), written in the
                // Chinchilla form: A = a·6^−η, B = b·6^−η, α = β = 2η.
                let eta: f64 = 0.13643;
                LossLaw {
                    e: 1.8366,
                    a: 212.24 * 6f64.powf(-eta),
                    b: 366.69 * 6f64.powf(-eta),
                    alpha: 2.0 * eta,
                    beta: 2.0 * eta,
                    repetition: None,
                    experts: None,
                }
            }
        }
    }
}

/// The runs a published law was fitted on, which its predictions interpolate: beyond them it
/// extrapolates, and a report says so ([`FittedRange::outside`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FittedRange {
    /// The smallest and largest model's parameters (active ones, for a law of experts); a
    /// smallest of 0 where the source states none.
    pub params: (f64, f64),
    /// The fewest and most training tokens.
    pub tokens: (f64, f64),
    /// For a law of experts, the most experts fitted, each as wide as the dense model's MLP
    /// under top-1 routing (so the law's number of experts is the expansion
    /// [`crate::model::Shape::expansion`]).
    pub experts: Option<f64>,
    /// The fewest and most tokens a parameter (`M = D/N`) where the source states them: a law
    /// fitted at about 20 extrapolates to an over-trained model's hundreds.
    pub multiplier: Option<(f64, f64)>,
    /// Whose runs they were.
    pub source: &'static str,
}

/// What a plan asks of a law beyond the runs it was fitted on: each quantity outside
/// [`FittedRange`] with how far, `(name, value, bound, "above" | "below")`.
pub type Outside = Vec<(&'static str, f64, f64, &'static str)>;

impl FittedRange {
    /// The range in words: `70 M–16 B parameters and 5 B–500 B tokens`, a smallest of 0 as
    /// `up to`, and for a law of experts `up to 32 experts (top-1, each as wide as the dense
    /// MLP)`.
    pub fn describe(&self) -> String {
        let span = |(lo, hi): (f64, f64), what: &str| {
            if lo > 0.0 {
                format!("{}–{} {what}", count(lo), count(hi))
            } else {
                format!("up to {} {what}", count(hi))
            }
        };
        match (self.experts, self.multiplier) {
            (None, Some((lo, hi))) => format!(
                "{}, {} and {}–{} tokens a parameter",
                span(self.params, "parameters"),
                span(self.tokens, "tokens"),
                general(lo),
                general(hi)
            ),
            (None, None) => format!(
                "{} and {}",
                span(self.params, "parameters"),
                span(self.tokens, "tokens")
            ),
            (Some(e), _) => format!(
                "{}, {} and up to {} experts (top-1, each as wide as the dense MLP)",
                span(self.params, "active parameters"),
                span(self.tokens, "tokens"),
                general(e)
            ),
        }
    }

    /// What a plan asks beyond the range, in words (`70.55 B parameters (above 16 B), 15 T
    /// tokens (above 500 B)`); `None` inside it.
    pub fn beyond(&self, size: LawSize, tokens: f64) -> Option<String> {
        let outside = self.outside(size, tokens);
        if outside.is_empty() {
            return None;
        }
        let words: Vec<String> = outside
            .iter()
            .map(|&(name, value, bound, side)| {
                let (value, bound) = if name == "experts" {
                    (
                        format!("an expansion of {}", fixed(value, 1)),
                        general(bound),
                    )
                } else if name == "tokens a parameter" {
                    (format!("{} {name}", fixed(value, 0)), general(bound))
                } else {
                    (format!("{} {name}", count(value)), count(bound))
                };
                format!("{value} ({side} {bound})")
            })
            .collect();
        Some(words.join(", "))
    }

    /// The quantities of a model of `size` trained on `tokens` that lie outside the range.
    pub fn outside(&self, size: LawSize, tokens: f64) -> Outside {
        let mut out = Vec::new();
        let mut check = |name, value: f64, (lo, hi): (f64, f64)| {
            if value > hi {
                out.push((name, value, hi, "above"));
            } else if value < lo {
                out.push((name, value, lo, "below"));
            }
        };
        check("parameters", size.params, self.params);
        check("tokens", tokens, self.tokens);
        if let Some(m) = self.multiplier {
            check("tokens a parameter", tokens / size.params, m);
        }
        if let Some(most) = self.experts {
            check("experts", size.expansion, (1.0, most));
        }
        out
    }
}

/// The line a report gives when a plan asks the brief's law beyond the runs it was fitted on:
/// `besiroglu extrapolates here: … ; fitted on … (…)`, for a model of `size` trained on
/// `tokens`; `None` inside the range, or for a law given by its constants.
pub fn extrapolation(law: &LossLaw, size: LawSize, tokens: f64) -> Option<String> {
    let preset = law.preset()?;
    let range = preset.fitted();
    let beyond = range.beyond(size, tokens)?;
    Some(format!(
        "{} extrapolates here: {beyond}; fitted on {} ({})",
        preset.name(),
        range.describe(),
        range.source
    ))
}

impl LossLawPreset {
    /// The runs this preset was fitted on.
    ///
    /// - Hoffmann et al. 2022 (abstract): "over 400 language models ranging from 70 million to
    ///   over 16 billion parameters on 5 to 500 billion tokens"; Besiroglu et al. 2024 refit
    ///   the same runs, read from Hoffmann et al.'s Figure 4.
    /// - Muennighoff et al. 2023 (abstract): "ranging up to 900 billion training tokens and 9
    ///   billion parameter models"; the abstract states the largest only, so the smallest are
    ///   taken as 0 (nothing is judged below the range).
    /// - Ludziejewski et al. 2025: "over 280 experiments with up to 2.7B active parameters and
    ///   up to 5B total parameters" (abstract); the smallest model (79M active), the tokens
    ///   (0.5B–80B) and the experts (up to 32, each the width of the dense MLP, top-1) are the
    ///   experiments' grid as the paper's §4 gives it, read for this preset's constants.
    /// - Gadre et al. 2024 (§3.2, Table 1): fitted on 0.011B to 0.411B parameters at a token
    ///   multiplier M = 20 and 0.011B at M = 320, and checked on 1.4B (M = 20 and 640) and 6.9B
    ///   (M = 20) runs; the range is that, 10.6 M to 6.9 B parameters on up to 922 B tokens at
    ///   M of 20 to 640 (below 20 its testbed is unreliable: "when token multipliers become too
    ///   small (i.e., M = 5) scaling becomes unreliable").
    pub fn fitted(self) -> FittedRange {
        match self {
            LossLawPreset::Besiroglu
            | LossLawPreset::BesirogluUnrounded
            | LossLawPreset::Hoffmann => FittedRange {
                params: (70e6, 16e9),
                tokens: (5e9, 500e9),
                experts: None,
                multiplier: None,
                source: "Hoffmann et al. 2022's runs",
            },
            LossLawPreset::Muennighoff => FittedRange {
                params: (0.0, 9e9),
                tokens: (0.0, 900e9),
                experts: None,
                multiplier: None,
                source: "Muennighoff et al. 2023's runs",
            },
            LossLawPreset::Ludziejewski => FittedRange {
                params: (79e6, 2.7e9),
                tokens: (0.5e9, 80e9),
                experts: Some(32.0),
                multiplier: None,
                source: "Ludziejewski et al. 2025's runs",
            },
            LossLawPreset::Gadre => FittedRange {
                params: (10.5e6, 6.9e9),
                tokens: (0.0, 922e9),
                experts: None,
                multiplier: Some((20.0, 640.0)),
                source: "Gadre et al. 2024's testbed",
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
    /// The preset whose fitted constants these are, if any: its five constants and its expert
    /// terms (a preset given repetition terms of the brief's own keeps its fitted range; a law
    /// given by other constants has none trainplan knows).
    pub fn preset(&self) -> Option<LossLawPreset> {
        LossLawPreset::ALL.into_iter().find(|p| {
            let l = p.law();
            (l.e, l.a, l.b, l.alpha, l.beta, l.experts)
                == (self.e, self.a, self.b, self.alpha, self.beta, self.experts)
        })
    }

    /// Checks every constant: all finite, E ≥ 0, A, B, α, β > 0.
    pub fn validate(&self, prefix: &str) -> Result<()> {
        let fields = [
            ("e", self.e, true),
            ("a", self.a, false),
            ("b", self.b, false),
            ("alpha", self.alpha, false),
            ("beta", self.beta, false),
        ];
        check_numbers(prefix, &fields, f64::INFINITY)?;
        if let Some(r) = &self.repetition {
            check_numbers(
                &format!("{prefix}repetition."),
                &[("r_d", r.r_d, false), ("r_n", r.r_n, false)],
                f64::INFINITY,
            )?;
        }
        if let Some(x) = &self.experts {
            let prefix = format!("{prefix}experts.");
            // Signed constants: any finite number.
            for (f, v) in [
                ("delta", x.delta),
                ("gamma", x.gamma),
                ("omega", x.omega),
                ("zeta", x.zeta),
            ] {
                if !v.is_finite() {
                    return Err(Error::invalid(
                        format!("{prefix}{f}"),
                        exact(v),
                        "a finite number",
                    ));
                }
            }
            if !(x.e_start.is_finite() && x.e_start > 1.0) {
                return Err(Error::invalid(
                    format!("{prefix}e_start"),
                    exact(x.e_start),
                    "a finite number above 1 (the Ê of one expert)",
                ));
            }
            if !(x.e_max.is_finite() && x.e_max > x.e_start) {
                return Err(Error::invalid(
                    format!("{prefix}e_max"),
                    exact(x.e_max),
                    format!("a finite number above e_start = {}", general(x.e_start)),
                ));
            }
            // Both exponents stay positive over every Ê the transform gives, [E_start, E_max).
            for e_hat in [x.e_start, x.e_max] {
                let (alpha, beta) = (
                    self.alpha - x.gamma * e_hat.ln(),
                    self.beta - x.zeta * e_hat.ln(),
                );
                if alpha <= 0.0 || beta <= 0.0 {
                    return Err(Error::invalid(
                        format!("{prefix}gamma and zeta"),
                        format!("{} and {}", general(x.gamma), general(x.zeta)),
                        format!(
                            "exponents that stay positive up to E_max: at Ê = {} they give α = {} and β = {}",
                            general(e_hat),
                            general(alpha),
                            general(beta)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The law for a model of `expansion` experts' worth of parameters per active one
    /// ([`crate::model::Shape::expansion`]; 1 for a dense model): without [`ExpertScaling`]
    /// the law itself; with it, the Chinchilla form with the constants of that expansion,
    /// `A·Ê^δ`, `α − γ·ln Ê`, `B·Ê^ω`, `β − ζ·ln Ê` (Ludziejewski et al. 2025, eq. 6 at a
    /// fixed `E`; their Table 4 lists it for E = 1 … 32). Repetition carries over.
    pub fn at(&self, expansion: f64) -> LossLaw {
        let Some(x) = self.experts else {
            return *self;
        };
        let e_hat = x.saturated(expansion.max(1.0));
        let ln = e_hat.ln();
        LossLaw {
            e: self.e,
            a: self.a * e_hat.powf(x.delta),
            b: self.b * e_hat.powf(x.omega),
            alpha: self.alpha - x.gamma * ln,
            beta: self.beta - x.zeta * ln,
            repetition: self.repetition,
            experts: None,
        }
    }

    /// The compute-optimal parameters for `d` tokens, `N_opt(D) = G·(G·D)^(β/α)`: the `N` whose
    /// compute-optimal partner [`Self::compute_optimal_params`] is `D` (Muennighoff et al.'s
    /// `D_to_N`).
    pub fn params_for_tokens(&self, d: f64) -> f64 {
        let g = self.optimal_ratio();
        (d * g).powf(self.beta / self.alpha) * g
    }

    /// `G = (αA / (βB))^(1/(α+β))` (Hoffmann et al. 2022, eq. 4).
    fn optimal_ratio(&self) -> f64 {
        (self.alpha * self.a / (self.beta * self.b)).powf(1.0 / (self.alpha + self.beta))
    }

    /// What `n` parameters trained on `d` tokens, `unique` of them distinct (`None`: as many as
    /// the run reads), are worth under the law's [`Repetition`]; `None` when the law has none.
    pub fn effective(&self, n: f64, d: f64, unique: Option<f64>) -> Option<Effective> {
        let r = self.repetition?;
        let seen = unique.map_or(d, |u| u.min(d));
        Some(Effective {
            params: self.effective_params(&r, n, seen),
            tokens: seen + seen * r.r_d * decay((d / seen - 1.0).max(0.0), r.r_d),
            epochs: d / unique.unwrap_or(d),
        })
    }

    /// `N' = U_N + U_N·R_N*·(1 − e^(−R_N/R_N*))` for `n` parameters on `seen` unique tokens,
    /// `U_N = min(N, N_opt(seen))`, `R_N = N/U_N − 1`.
    fn effective_params(&self, r: &Repetition, n: f64, seen: f64) -> f64 {
        let base = n.min(self.params_for_tokens(seen));
        base + base * r.r_n * decay((n / base - 1.0).max(0.0), r.r_n)
    }

    /// The predicted loss of `n` parameters on `d` tokens of which `unique` are distinct:
    /// [`Self::loss`] at the effective parameters and tokens when the law has a
    /// [`Repetition`], else `L(N, D)` itself (`unique` then changes nothing; a brief refuses
    /// unique tokens without a law that values repeats).
    pub fn loss_with(&self, n: f64, d: f64, unique: Option<f64>) -> f64 {
        match self.effective(n, d, unique) {
            None => self.loss(n, d),
            Some(e) => self.loss(e.params, e.tokens),
        }
    }

    /// The loss `n` parameters approach with unlimited training on `unique` distinct tokens:
    /// `E + A/N^α` for the plain law or unlimited data; with a [`Repetition`] and `U` unique
    /// tokens, `E + A/N'^α + B/(U·(1 + R_D*))^β`, its limit as the repeats grow.
    pub fn floor_with(&self, n: f64, unique: Option<f64>) -> f64 {
        match (self.repetition, unique) {
            (Some(r), Some(u)) => {
                self.loss_floor(self.effective_params(&r, n, u)) + self.data_term(u * (1.0 + r.r_d))
            }
            _ => self.loss_floor(n),
        }
    }

    /// The fewest tokens (continuous) with which `n` parameters reach `target` on `unique`
    /// distinct tokens. The plain law in closed form ([`Self::tokens_for_loss`]); with a
    /// [`Repetition`], by bisection of [`Self::loss_with`], which falls strictly as the tokens
    /// grow (both `D'` and `U_N` rise with `D`), to the last bit of the float. `None` when no
    /// float of tokens reaches it (the floor, [`Self::floor_with`], is above the target).
    pub fn tokens_for_loss_with(&self, n: f64, target: f64, unique: Option<f64>) -> Option<f64> {
        if self.repetition.is_none() {
            return self.tokens_for_loss(n, target);
        }
        // The floor decides only where it clears the target by more than rounding: where
        // they meet, the loss at enough repeats may equal the target in floats (both
        // saturate), and the doubling below settles it.
        if self.floor_with(n, unique) > target * (1.0 + 1e-12) {
            return None;
        }
        let meets = |d: f64| self.loss_with(n, d, unique) <= target;
        let (mut lo, mut hi) = (0.5_f64, 1.0_f64);
        while !meets(hi) {
            lo = hi;
            hi *= 2.0;
            if !hi.is_finite() {
                return None;
            }
        }
        // Halve [lo, hi] until it holds no float between its ends.
        loop {
            let mid = lo + (hi - lo) / 2.0;
            if mid <= lo || mid >= hi {
                return Some(hi);
            }
            if meets(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
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
        let g = self.optimal_ratio();
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
    /// [`LossLaw::compute_optimal_params`]), its loss graded on `unique` distinct tokens
    /// ([`LossLaw::loss_with`]). The split is Chinchilla's, for unlimited data: with fewer
    /// unique tokens than it reads, the data-constrained optimum lies elsewhere (Muennighoff
    /// et al. find it by a grid search), and this point's loss says what repeating costs it.
    /// Under a law with [`ExpertScaling`] it is the dense model's (one expert).
    pub fn for_budget(law: &LossLaw, budget_flops: f64, unique: Option<f64>) -> Self {
        // A dense model's split: the law at one expert (the law itself without expert terms).
        let law = law.at(1.0);
        let n = law.compute_optimal_params(budget_flops);
        let d = budget_flops / 6.0 / n;
        let (params, tokens) = (n.round() as u64, d.round() as u64);
        ComputeOptimal {
            params,
            tokens,
            loss: law.loss_with(params as f64, tokens as f64, unique),
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
        let opt = ComputeOptimal::for_budget(&LossLaw::default(), 2.100_009_369_6e24, None);
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
    fn the_joint_moe_law_gives_its_authors_per_expert_fits() {
        // Ludziejewski et al. 2025, Appendix B, Table 4: the law at fixed E as
        // m·N^μ + n·D^ν + c. Their Table 3's constants are rounded to four figures, so the
        // fits are met to 0.3 % (the exponents to 0.001).
        let law = LossLawPreset::Ludziejewski.law();
        for (experts, m, mu, n, nu) in [
            (1.0, 30.3640, -0.1817, 53.9838, -0.1965),
            (8.0, 21.8330, -0.1676, 119.9126, -0.2338),
            (32.0, 16.5424, -0.1557, 234.6726, -0.2652),
        ] {
            let at = law.at(experts);
            assert!(close(at.a, m, 3e-3), "E {experts}: A {}", at.a);
            assert!((at.alpha + mu).abs() < 1e-3, "E {experts}: α {}", at.alpha);
            assert!(close(at.b, n, 3e-3), "E {experts}: B {}", at.b);
            assert!((at.beta + nu).abs() < 1e-3, "E {experts}: β {}", at.beta);
            assert_eq!((at.e, at.experts), (1.3637, None));
        }
        // One expert is E_start: Ê(1) = 2.0732 exactly as eq. 4 is built.
        let x = law.experts.unwrap();
        assert!((x.saturated(1.0) - 2.0732).abs() < 1e-12);
        // Table 1: the compute-optimal dense model at 1e20 FLOPs has 1.7B active parameters
        // on 9.7B tokens.
        let n = law.at(1.0).compute_optimal_params(1e20);
        assert!(close(n, 1.73e9, 0.01), "{n}");
        // A law without expert terms is itself at any expansion.
        assert_eq!(LossLaw::default().at(8.0), LossLaw::default());
    }

    #[test]
    fn more_experts_lower_the_loss_at_the_same_active_parameters_and_tokens() {
        let law = LossLawPreset::Ludziejewski.law();
        let at = |e: f64| law.at(e).loss(1e9, 20e9);
        assert!(
            at(1.0) > at(4.0) && at(4.0) > at(32.0),
            "{} {} {}",
            at(1.0),
            at(4.0),
            at(32.0)
        );
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

    #[test]
    fn the_data_constrained_law_gives_its_authors_worked_examples() {
        // Muennighoff et al.'s repository README, "Parametric Fit", Figure 1 (right): 25B
        // unique tokens, 6.34B parameters on 242B tokens against 8.67B on 178B.
        let law = LossLawPreset::Muennighoff.law();
        let l = law.loss_with(6.34e9, 242e9, Some(25e9));
        assert!((l - 2.2256440889984477).abs() < 1e-12, "{l}");
        let l = law.loss_with(8.67e9, 178e9, Some(25e9));
        assert!((l - 2.2269634075087867).abs() < 1e-12, "{l}");
    }

    #[test]
    fn repeated_tokens_are_worth_less_and_the_epochs_are_counted() {
        let law = LossLawPreset::Muennighoff.law();
        // 4 epochs of 25B: R_D = 3, D' = 25e9·(1 + 15.387756·(1 − e^(−3/15.387756))) =
        // 25e9·(1 + 15.387756·0.1771326) = 93.14183e9 (worked in Python), not 100e9.
        let e = law.effective(1e9, 100e9, Some(25e9)).unwrap();
        assert!((e.tokens / 93.141_83e9 - 1.0).abs() < 1e-6, "{}", e.tokens);
        assert_eq!(e.epochs, 4.0);
        // A 1B model is under the 25B tokens' optimum (G² = 0.050987: 1.2747B): all its
        // parameters count.
        assert_eq!(e.params, 1e9);
        // Fewer tokens than the data holds: nothing repeated, one pass or less.
        let once = law.effective(1e9, 20e9, Some(25e9)).unwrap();
        assert_eq!((once.tokens, once.epochs), (20e9, 0.8));
        // The plain law has no effective tokens and grades as before, to the bit.
        let plain = LossLaw::default();
        assert_eq!(plain.effective(1e9, 1e12, Some(1e9)), None);
        assert_eq!(
            plain.loss_with(70e9, 1e12, None).to_bits(),
            plain.loss(70e9, 1e12).to_bits()
        );
    }

    #[test]
    fn the_tokens_for_a_target_invert_the_data_constrained_law() {
        let law = LossLawPreset::Muennighoff.law();
        let (n, u) = (6.34e9, Some(25e9));
        let target = 2.23;
        let d = law.tokens_for_loss_with(n, target, u).unwrap();
        assert!(law.loss_with(n, d, u) <= target);
        assert!(law.loss_with(n, d * (1.0 - 1e-12), u) > target);
        // More than 25B, so repeated, and more than unlimited unique data would need.
        let unlimited = law.tokens_for_loss_with(n, target, None).unwrap();
        assert!(d > 25e9 && d > unlimited, "{d} {unlimited}");
        // The floor with 25B unique tokens: repeats saturate at 25e9·(1 + R_D*) tokens.
        let floor = law.floor_with(n, u);
        assert!(law.loss_with(n, 1e18, u) - floor < 1e-9);
        assert_eq!(law.tokens_for_loss_with(n, floor * (1.0 - 1e-9), u), None);
        // At the floor itself the repeats may reach it in floats: then the tokens found do.
        if let Some(d) = law.tokens_for_loss_with(n, floor, u) {
            assert!(law.loss_with(n, d, u) <= floor);
        }
        assert!(floor > law.floor_with(n, None));
    }

    #[test]
    fn a_plan_beyond_the_runs_a_law_was_fitted_on_is_told_by_how_much() {
        // Chinchilla's runs: 70 M to 16 B parameters on 5 B to 500 B tokens. Llama 3 70B
        // (70,553,706,496 parameters) on 15 T tokens lies beyond both; a 1 B model on 20 B
        // tokens inside; 50 M parameters below.
        let law = LossLawPreset::Besiroglu.law();
        let line = extrapolation(&law, 70_553_706_496.0.into(), 15e12).unwrap();
        assert_eq!(
            line,
            "besiroglu extrapolates here: 70.55 B parameters (above 16 B), 15 T tokens (above \
             500 B); fitted on 70 M–16 B parameters and 5 B–500 B tokens (Hoffmann et al. \
             2022's runs)"
        );
        assert_eq!(extrapolation(&law, 1e9.into(), 20e9), None);
        let small = LossLawPreset::Hoffmann.fitted().beyond(50e6.into(), 20e9);
        assert_eq!(small.as_deref(), Some("50 M parameters (below 70 M)"));
        // Muennighoff et al. state the largest only: nothing is judged below.
        let data = LossLawPreset::Muennighoff.fitted();
        assert_eq!(data.beyond(1e6.into(), 1e6), None);
        assert_eq!(
            data.describe(),
            "up to 9 B parameters and up to 900 B tokens"
        );
        // The joint MoE law: DeepSeek-V3's 37.55 B active parameters at an expansion of
        // (256·2,048 + 2,048)/(8·2,048 + 2,048) = 28.6, inside its 32 experts, on 14.8 T
        // tokens; 64 experts of the dense width at top 1 lie beyond in experts too.
        let moe = LossLawPreset::Ludziejewski.fitted();
        let v3 = LawSize {
            params: 37_552_297_472.0,
            expansion: 257.0 / 9.0,
        };
        assert_eq!(
            moe.beyond(v3, 14.8e12).as_deref(),
            Some("37.55 B parameters (above 2.7 B), 14.8 T tokens (above 80 B)")
        );
        let wide = LawSize {
            params: 1e9,
            expansion: 64.0,
        };
        assert_eq!(
            moe.beyond(wide, 10e9).as_deref(),
            Some("an expansion of 64.0 (above 32)")
        );
        // Every preset is known by its constants; a law given by others has no range.
        for p in LossLawPreset::ALL {
            assert_eq!(p.law().preset(), Some(p));
        }
        let custom = LossLaw { e: 1.7, ..law };
        assert_eq!(extrapolation(&custom, 70e9.into(), 15e12), None);
        // A preset given the brief's own repetition terms keeps its fitted range.
        let repeated = LossLaw {
            repetition: Some(Repetition {
                r_d: 15.0,
                r_n: 5.0,
            }),
            ..law
        };
        assert_eq!(repeated.preset(), Some(LossLawPreset::Besiroglu));
    }
}
