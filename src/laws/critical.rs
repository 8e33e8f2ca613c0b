//! The critical batch: past it, a larger batch buys fewer steps but needs more tokens for the
//! same loss.
//!
//! McCandlish et al. 2018 ("An Empirical Model of Large-Batch Training", arXiv:1812.06162,
//! §2.3) found that the optimizer steps `S` and the examples `E = B·S` a run needs to reach a
//! loss trade off as `(S/S_min − 1)·(E/E_min − 1) = 1`, so that at a global batch of `B`
//! tokens
//!
//! ```text
//! S = S_min·(1 + B_crit/B),   E = E_min·(1 + B/B_crit),   B_crit = E_min/S_min
//! ```
//!
//! with `E_min` the tokens the loss takes at a batch far below `B_crit` and `S_min` the steps
//! at a batch far above. At `B = B_crit` a run needs twice the fewest tokens.
//!
//! **Convention.** A loss law's tokens are read as `E_min` (written `D_min` here): a plan
//! training `D` tokens at a batch of `B` reaches the loss of the `x` tokens that solve
//! `x·(1 + B/B_crit(x)) = D` ([`CriticalBatch::effective_tokens`]), and the tokens a target
//! needs are `D_min·(1 + B/B_crit(D_min))` ([`CriticalBatch::tokens_needed`]). The loss laws'
//! own runs trained at batches below their critical batch, though not far below, so this
//! counts the waste in full: an upper bound on it.
//!
//! **The law, `zhang`.** Zhang et al. 2024 ("How Does Critical Batch Size Scale in
//! Pre-training?", arXiv:2410.21676) trained 85 M – 1.2 B-parameter models on C4 (sequences of
//! 512, batches of 64 – 16,384 sequences, about 20 tokens a parameter) and found the critical
//! batch "scales primarily with data size rather than model size". Their notebook
//! (github.com/hlzhang109/critical-batch-size, `plots/chinchilla.ipynb`, commit c5b509d) fits
//! `S(B) = a + b/B` to the steps each model took to its target loss at each batch: in
//! McCandlish's terms `S_min = a` and `E_min = b` sequences, so `B_crit = b/a`. (The paper's
//! own "CBS" is a 20 %-overhead point of the same fit, `b/(5a) + 1.2·256` sequences, not
//! McCandlish's `B_crit`, which the token count above needs.) From their five fits, in tokens:
//!
//! | model | `a` (steps) | `b` (sequences) | `D_min = 512·b` | `B_crit = 512·b/a` |
//! |---|---|---|---|---|
//! | 85 M | 1,293.8 | 2.834e6 | 1.451e9 | 1.122e6 |
//! | 151 M | 1,752.4 | 5.677e6 | 2.907e9 | 1.659e6 |
//! | 302 M | 2,095.3 | 1.138e7 | 5.828e9 | 2.782e6 |
//! | 604 M | 2,459.9 | 1.945e7 | 9.958e9 | 4.048e6 |
//! | 1.2 B | 3,897.3 | 4.338e7 | 2.221e10 | 5.699e6 |
//!
//! and a least-squares line in log–log through them is this module's law,
//! `B_crit = 2.498 · D_min^0.6174` tokens ([`ZHANG_COEFFICIENT`], [`ZHANG_EXPONENT`]; every
//! model within 9 %). It is fitted on `D_min` of 1.45 – 22.2 B tokens; a plan's run is usually
//! far beyond, and the report says so. Bergsma et al. 2025 ("Power Lines", arXiv:2505.13738)
//! report a smaller exponent in `D_min` (about 0.46) on 111 M – 3.3 B models: carried from the
//! largest fitted run to 15 T tokens, theirs gives about a third of this law's critical batch,
//! which is why `--sensitivity` moves it down to a third ([`RANGE`]).

use crate::format::count;

/// `k` of `B_crit = k·D_min^γ`, tokens: the fit of the module's table.
pub const ZHANG_COEFFICIENT: f64 = 2.4978;

/// `γ` of `B_crit = k·D_min^γ`: the fit of the module's table.
pub const ZHANG_EXPONENT: f64 = 0.6174;

/// The `D_min` the fit spans, tokens: Zhang et al.'s 85 M and 1.2 B models.
pub const ZHANG_FITTED: (f64, f64) = (1.451e9, 2.221e10);

/// How far `--sensitivity` moves the critical batch, as factors of the law's: down to a third
/// (Power Lines' exponent carried to a 15 T-token run, module docs) and up to twice (the
/// fit's own scatter is under a tenth; the rest is extrapolation either way).
pub const RANGE: (f64, f64) = (1.0 / 3.0, 2.0);

/// Whether and by which law a plan's batch costs tokens past the critical batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CriticalBatch {
    /// No cost: the loss law's tokens at any batch (the default, so pinned answers stay).
    #[default]
    Off,
    /// McCandlish's trade-off with the critical batch fitted on Zhang et al. 2024's runs.
    Zhang,
}

impl CriticalBatch {
    /// Every choice, in the order `--help` lists them.
    pub const ALL: [CriticalBatch; 2] = [CriticalBatch::Off, CriticalBatch::Zhang];

    /// The name `--critical-batch` takes.
    pub fn name(self) -> &'static str {
        match self {
            CriticalBatch::Off => "off",
            CriticalBatch::Zhang => "zhang",
        }
    }

    /// The choice of `name`, if there is one.
    pub fn from_name(name: &str) -> Option<CriticalBatch> {
        CriticalBatch::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Whether no batch costs tokens.
    pub fn is_off(&self) -> bool {
        *self == CriticalBatch::Off
    }

    /// The critical batch, tokens, of a run whose loss takes `d_min` tokens at a small batch:
    /// `2.498 · D_min^0.6174` times `scale` (1 as fitted; [`RANGE`] for `--sensitivity`);
    /// `None` when off.
    pub fn critical_tokens(self, d_min: f64, scale: f64) -> Option<f64> {
        match self {
            CriticalBatch::Off => None,
            CriticalBatch::Zhang => {
                Some(scale * ZHANG_COEFFICIENT * d_min.max(1.0).powf(ZHANG_EXPONENT))
            }
        }
    }

    /// The tokens a run at a global batch of `batch` tokens needs to reach the loss of
    /// `d_min`: `D_min·(1 + B/B_crit(D_min))`; `d_min` itself when off.
    pub fn tokens_needed(self, d_min: f64, batch: f64, scale: f64) -> f64 {
        match self.critical_tokens(d_min, scale) {
            None => d_min,
            Some(crit) => d_min * (1.0 + batch / crit),
        }
    }

    /// The tokens whose loss a run of `tokens` at a global batch of `batch` tokens reaches:
    /// the `x` with `x·(1 + B/B_crit(x)) = D`, the root of the increasing
    /// `f(x) = x + (B/k)·x^(1−γ)` at `D`: the largest double `x` in `[0, D]` with `f(x) ≤ D`,
    /// found by bisection on the doubles' bit patterns (ordered as their values), so that it
    /// grows with `tokens` exactly, as a search's monotone windows and fronts need (an
    /// iteration stopped at a tolerance would not); `tokens` itself when off.
    pub fn effective_tokens(self, tokens: f64, batch: f64, scale: f64) -> f64 {
        let Some(k) = self.critical_tokens(1.0, scale) else {
            return tokens;
        };
        // Nothing to solve for a run of no tokens, no batch, or not a number.
        if tokens.is_nan() || batch.is_nan() || tokens <= 0.0 || batch <= 0.0 || !tokens.is_finite()
        {
            return tokens.max(0.0);
        }
        let g = 1.0 - ZHANG_EXPONENT;
        let c = batch / k;
        let fits = |x: f64| x + c * x.powf(g) <= tokens;
        // f(0) = 0 ≤ D < f(D): the answer's bits lie in [0, bits(D)).
        let (mut lo, mut hi) = (0u64, tokens.to_bits());
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(f64::from_bits(mid)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        f64::from_bits(lo)
    }

    /// The words a report gives when a run whose loss takes `d_min` tokens is beyond the
    /// fitted range; `None` inside it or when off.
    pub fn extrapolation(self, d_min: f64) -> Option<String> {
        if self.is_off() {
            return None;
        }
        let (lo, hi) = ZHANG_FITTED;
        let side = if d_min > hi {
            "above"
        } else if d_min < lo {
            "below"
        } else {
            return None;
        };
        Some(format!(
            "the critical batch extrapolates: {} tokens that count ({side} the {}–{} tokens fitted on Zhang et al. 2024's 85 M – 1.2 B models)",
            count(d_min),
            count(lo),
            count(hi)
        ))
    }
}

impl std::fmt::Display for CriticalBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for CriticalBatch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for CriticalBatch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        CriticalBatch::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown critical batch {name:?}: one of off, zhang"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zhang et al.'s fits `S(B) = a + b/B` (steps, sequences of 512), as their notebook
    /// prints them.
    const FITS: [(f64, f64); 5] = [
        (1293.8268694659337, 2834258.0888740215),
        (1752.4211962796799, 5677478.783007255),
        (2095.3497601960876, 11383269.891870424),
        (2459.9274969089824, 19449688.58779496),
        (3897.306597333535, 43381130.22429582),
    ];

    #[test]
    fn the_law_is_the_line_through_zhang_et_als_critical_batches() {
        // Refit here by least squares in log–log: the constants are the fit's.
        let points: Vec<(f64, f64)> = FITS
            .iter()
            .map(|&(a, b)| ((512.0 * b).ln(), (512.0 * b / a).ln()))
            .collect();
        let n = points.len() as f64;
        let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
        let my = points.iter().map(|p| p.1).sum::<f64>() / n;
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let gamma = sxy / sxx;
        let k = (my - gamma * mx).exp();
        assert!((gamma - ZHANG_EXPONENT).abs() < 1e-4, "{gamma}");
        assert!((k / ZHANG_COEFFICIENT - 1.0).abs() < 1e-3, "{k}");
        // Each model's critical batch within 9 % of the line.
        for &(a, b) in &FITS {
            let law = CriticalBatch::Zhang
                .critical_tokens(512.0 * b, 1.0)
                .unwrap();
            assert!((law / (512.0 * b / a) - 1.0).abs() < 0.09);
        }
    }

    #[test]
    fn at_the_critical_batch_a_run_needs_twice_the_fewest_tokens() {
        // McCandlish et al.: E = E_min·(1 + B/B_crit), so 2·E_min at B = B_crit.
        let d_min = 1e12;
        let crit = CriticalBatch::Zhang.critical_tokens(d_min, 1.0).unwrap();
        // By hand: 2.4978 · 1e12^0.6174 = 2.4978 · 10^7.4088 = 6.40e7 tokens.
        assert!((crit / 6.40e7 - 1.0).abs() < 0.01, "{crit}");
        let needed = CriticalBatch::Zhang.tokens_needed(d_min, crit, 1.0);
        assert!((needed / (2.0 * d_min) - 1.0).abs() < 1e-12);
        // And the effective tokens undo it.
        let back = CriticalBatch::Zhang.effective_tokens(needed, crit, 1.0);
        assert!((back / d_min - 1.0).abs() < 1e-9, "{back}");
    }

    #[test]
    fn the_effective_tokens_invert_the_tokens_needed_at_every_scale() {
        for d_min in [1e9, 3.3e11, 1.5e13] {
            for batch in [5e5, 1.6e7, 7.5e7, 1e9] {
                for scale in [RANGE.0, 1.0, RANGE.1] {
                    let d = CriticalBatch::Zhang.tokens_needed(d_min, batch, scale);
                    assert!(d > d_min);
                    let x = CriticalBatch::Zhang.effective_tokens(d, batch, scale);
                    assert!((x / d_min - 1.0).abs() < 1e-9, "{d_min} {batch} {scale}");
                }
            }
        }
    }

    #[test]
    fn the_tokens_that_count_never_fall_as_the_tokens_trained_rise() {
        // Token by token: a search's windows and fronts bisect on it.
        for start in [
            4_096u64,
            3_000_000_000,
            1_000_000_000_000,
            15_000_000_000_000,
        ] {
            for batch in [1e6, 2.7e7, 1e9] {
                let mut last = 0.0;
                for d in start..start + 2_000 {
                    let x = CriticalBatch::Zhang.effective_tokens(d as f64, batch, 0.01);
                    assert!(x >= last, "{d} {batch}");
                    last = x;
                }
            }
        }
    }

    #[test]
    fn off_costs_nothing_and_names_round_trip() {
        assert_eq!(CriticalBatch::Off.tokens_needed(1e12, 1e9, 1.0), 1e12);
        assert_eq!(CriticalBatch::Off.effective_tokens(1e12, 1e9, 1.0), 1e12);
        assert_eq!(CriticalBatch::Off.extrapolation(1e15), None);
        for c in CriticalBatch::ALL {
            assert_eq!(CriticalBatch::from_name(c.name()), Some(c));
        }
        let words = CriticalBatch::Zhang.extrapolation(1.5e13).unwrap();
        assert!(
            words.contains("above the 1.451 B–22.21 B tokens"),
            "{words}"
        );
        assert_eq!(CriticalBatch::Zhang.extrapolation(5e9), None);
    }
}
