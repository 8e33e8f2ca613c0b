//! The time model's flags (`--time` and what the detailed model reads), shared by `check` and
//! `search`.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use crate::cost::run::TimeModel;
use crate::cost::step::stack::Stack;
use crate::cost::step_time::options::TimeOptions;
use crate::error::{Error, Result};
use crate::input;

/// `--time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TimeArg {
    /// Days by 6ND at the brief's assumed MFU (SPEC.md's plate).
    Plate,
    /// Days from a step's compute, communication, bubble and optimizer, with failures.
    Detailed,
}

/// The time model's settings, shared by `check` and `search`.
#[derive(Debug, Args)]
#[command(next_help_heading = "Time model")]
pub struct TimeArgs {
    /// Time model: the plate (default) or a detailed step that derives the MFU. The detailed
    /// model needs --memory detailed, which defines the step.
    #[arg(long, value_enum, default_value = "plate")]
    pub time: TimeArg,
    /// The detailed models, memory and time: short for --memory detailed --time detailed.
    #[arg(long, conflicts_with_all = ["memory", "time"])]
    pub detailed: bool,
    /// Calibrated parameters from `trainplan calibrate` (and, for --stack eager, an efficiency
    /// table {"points": [{"width": h/TP, "efficiency": f}, …]}, the form --efficiency read)
    /// [default: the fit to data/published].
    #[arg(long, value_name = "FILE.json")]
    pub calibration: Option<PathBuf>,
    /// The eager stack's efficiency table alone (superseded by --calibration, which reads the
    /// same file) [default: fitted to data/calibration].
    #[arg(long, value_name = "FILE.json", conflicts_with = "calibration")]
    pub efficiency: Option<PathBuf>,
    /// Fraction of TP communication hidden behind the layer's GEMMs, as far as they last
    /// [default: the stack's].
    #[arg(long, value_name = "FRACTION")]
    pub tp_overlap: Option<f64>,
    /// Fraction of pipeline sends hidden behind compute [default: the stack's].
    #[arg(long, value_name = "FRACTION")]
    pub pp_overlap: Option<f64>,
    /// Fraction of the last backward that DP communication overlaps [default: the stack's].
    #[arg(long, value_name = "FRACTION")]
    pub dp_overlap: Option<f64>,
}

impl TimeArgs {
    /// The files the time model reads.
    pub fn inputs(&self) -> impl Iterator<Item = &Path> {
        self.calibration
            .as_deref()
            .into_iter()
            .chain(self.efficiency.as_deref())
    }

    /// The time model for `stack`.
    pub fn model(&self, stack: Stack) -> Result<TimeModel> {
        let given = self.efficiency.is_some()
            || self.calibration.is_some()
            || self.tp_overlap.is_some()
            || self.pp_overlap.is_some()
            || self.dp_overlap.is_some();
        if self.time == TimeArg::Plate {
            if given {
                return Err(Error::invalid(
                    "--time",
                    "plate",
                    "--time detailed, which the calibration, efficiency and overlap flags need",
                ));
            }
            return Ok(TimeModel::Plate);
        }
        let mut d = TimeOptions::for_stack(stack);
        if let Some(path) = &self.calibration {
            let file = input::calibration(path)?;
            // The fit's parameters and, for the eager stack, its curve.
            if let Some(c) = file.calibration {
                d.calibration = c;
            }
            if let Some(curve) = file.efficiency {
                d.efficiency = curve;
            }
        }
        let options = TimeOptions {
            calibration: d.calibration,
            efficiency: match &self.efficiency {
                Some(path) => input::efficiency_curve(path)?,
                None => d.efficiency,
            },
            tp_overlap: self.tp_overlap.unwrap_or(d.tp_overlap),
            pp_overlap: self.pp_overlap.unwrap_or(d.pp_overlap),
            dp_overlap: self.dp_overlap.unwrap_or(d.dp_overlap),
        };
        options.validate()?;
        Ok(TimeModel::Detailed(options))
    }
}
