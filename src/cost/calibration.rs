//! The detailed time model's calibrated parameters: few, named, bounded, and fitted to
//! measured runs by `trainplan calibrate` (the published set's fit ships as the default).
//!
//! | parameter | meaning | bounds |
//! |---|---|---|
//! | `sustained` | fraction of the kernel benchmarks' FLOP rates (GEMM ceilings, attention tables) that a training step's GEMMs and attention keep: power-limited clocks over a long step, SMs shared with communication kernels, launch gaps between kernels | 0.5 to 1.0 |
//!
//! Everything else in the model is a published figure or a formula. The shipped value was
//! fitted to `data/published/runs.json` (all 22 runs at their cards' published peaks) by
//! minimising the mean absolute error in MFU points; `results/time-validation.md` reports every
//! run's error with its family left out of the fit.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The calibrated parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// Fraction of benchmarked kernel throughput kept in a step.
    pub sustained: f64,
}

/// `sustained`'s bounds.
pub const SUSTAINED: (f64, f64) = (0.5, 1.0);

/// The fit to the published runs (`trainplan calibrate data/published/runs.json`).
pub const PUBLISHED_SUSTAINED: f64 = 0.826;

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            sustained: PUBLISHED_SUSTAINED,
        }
    }
}

impl Calibration {
    /// Checks each parameter is within its bounds; the error names it.
    pub fn validate(&self) -> Result<()> {
        let (lo, hi) = SUSTAINED;
        if !(self.sustained.is_finite() && (lo..=hi).contains(&self.sustained)) {
            return Err(Error::invalid(
                "calibration.sustained",
                self.sustained,
                format!("a fraction from {lo} to {hi}"),
            ));
        }
        Ok(())
    }
}

/// The value in `[lo, hi]` that minimises `f`, by golden-section search to `tolerance`
/// (Kiefer 1953): `f` must be unimodal on the interval, as a mean absolute error in one
/// throughput parameter is.
pub fn golden_section(lo: f64, hi: f64, tolerance: f64, f: impl Fn(f64) -> f64) -> f64 {
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (lo, hi);
    let mut c = b - ratio * (b - a);
    let mut d = a + ratio * (b - a);
    let (mut fc, mut fd) = (f(c), f(d));
    while b - a > tolerance {
        if fc <= fd {
            b = d;
            d = c;
            fd = fc;
            c = b - ratio * (b - a);
            fc = f(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + ratio * (b - a);
            fd = f(d);
        }
    }
    (a + b) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_within_its_bounds_and_bad_values_are_named() {
        Calibration::default().validate().unwrap();
        let e = Calibration { sustained: 1.2 }
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("calibration.sustained = 1.2"), "{e}");
    }

    #[test]
    fn golden_section_finds_the_minimum_of_an_absolute_error() {
        let x = golden_section(0.5, 1.0, 1e-6, |x| (x - 0.7312).abs() + 0.1);
        assert!((x - 0.7312).abs() < 1e-5, "{x}");
        // A minimum at the bound is found at the bound.
        let y = golden_section(0.5, 1.0, 1e-6, |x| x);
        assert!((y - 0.5).abs() < 1e-5, "{y}");
    }
}
