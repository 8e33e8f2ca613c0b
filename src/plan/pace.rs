//! How a run's days grow with its tokens: the plate's 6ND or the detailed model's days per token.

use crate::brief::Brief;
use crate::cost::run::plate as time;

/// How a run's days grow with its tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// The plate's 6ND at the brief's assumed MFU.
    Plate,
    /// The detailed time model's days per token (failures included).
    PerToken(f64),
}

impl Pace {
    /// The pace of `days_per_token` under the detailed time model, the plate's for `None`.
    pub fn from_days_per_token(days_per_token: Option<f64>) -> Pace {
        days_per_token.map_or(Pace::Plate, Pace::PerToken)
    }

    /// Days per token under the detailed time model, `None` for the plate's.
    pub fn days_per_token(&self) -> Option<f64> {
        match self {
            Pace::Plate => None,
            Pace::PerToken(k) => Some(*k),
        }
    }

    /// Days for `tokens`, given the plate's days for them.
    pub fn days(&self, plate_days: f64, tokens: u64) -> f64 {
        match self {
            Pace::Plate => plate_days,
            Pace::PerToken(k) => tokens as f64 * k,
        }
    }

    /// Days for `tokens` of a model of `params` parameters under `brief`: the plate's
    /// [`time::days`] (6ND at the assumed MFU) or the tokens times the detailed days per
    /// token. Checks, verdicts, windows, `--all`'s lines and the shards' chains reckon days
    /// here; `evaluate` and the search's grid loop (which works out the plate's days once a
    /// count for every configuration) apply the same [`Pace::days`], so all agree to the bit.
    pub fn run_days(&self, brief: &Brief, params: u64, tokens: u64) -> f64 {
        self.days(
            time::days(
                brief.cluster_flops_per_second(),
                params as f64,
                tokens as f64,
            ),
            tokens,
        )
    }

    /// A key that orders paces from fastest to slowest (all plate paces are equal).
    pub fn key(&self) -> f64 {
        match self {
            Pace::Plate => 0.0,
            Pace::PerToken(k) => *k,
        }
    }
}
