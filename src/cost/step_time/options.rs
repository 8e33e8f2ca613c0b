//! The detailed time model's settings: the eager curve, the calibration, and how much of each
//! parallelism's communication the stack hides.

use crate::cost::chip::calibration::Calibration;
use crate::cost::chip::efficiency::EfficiencyCurve;
use crate::cost::step::stack::Stack;
use crate::cost::step::Step;
use crate::error::Error;
use crate::error::Result;
use serde::{Deserialize, Serialize};
/// The settings of the detailed time model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeOptions {
    /// Efficiency against the per-GPU width (the `eager` stack's compute).
    pub efficiency: EfficiencyCurve,
    /// The calibrated parameters of the per-operation model.
    pub calibration: Calibration,
    /// Fraction of TP communication hidden behind the layer's GEMMs, 0 to 1 (the stack's).
    pub tp_overlap: f64,
    /// Fraction of pipeline sends hidden behind compute, 0 to 1 (the stack's).
    pub pp_overlap: f64,
    /// Fraction of the compute data-parallel communication can hide behind, 0 to 1 (the
    /// stack's): the last micro-batch's backward for a once-a-step reduction, the step's
    /// compute after them for ZeRO 2's and 3's per-micro-batch traffic.
    pub dp_overlap: f64,
}

impl Default for TimeOptions {
    fn default() -> Self {
        TimeOptions::for_stack(Stack::default())
    }
}

impl TimeOptions {
    /// The settings `stack` implies, at the shipped calibration.
    pub fn for_stack(stack: Stack) -> Self {
        let s = stack.settings();
        TimeOptions {
            efficiency: EfficiencyCurve::calibrated().clone(),
            calibration: Calibration::default(),
            tp_overlap: s.tp_overlap,
            pp_overlap: s.pp_overlap,
            dp_overlap: s.dp_overlap,
        }
    }

    /// Checks each overlap is a fraction in [0, 1] and the calibration is within bounds.
    pub fn validate(&self) -> Result<()> {
        for (flag, v) in [
            ("--tp-overlap", self.tp_overlap),
            ("--pp-overlap", self.pp_overlap),
            ("--dp-overlap", self.dp_overlap),
        ] {
            if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                return Err(Error::invalid(
                    flag,
                    crate::format::exact(v),
                    "a fraction in [0, 1]",
                ));
            }
        }
        self.calibration.validate()
    }
}

/// Whether `step`'s TP collectives are chunked and overlapped with its GEMMs: the step asks
/// for it ([`Step::tp_comm_overlap`]) and the options hide some of them.
pub(crate) fn overlaps(step: &Step, opts: &TimeOptions) -> bool {
    step.tp_comm_overlap && opts.tp_overlap > 0.0
}
