//! Runnable first: a plate plan graded again by the detailed model, so that among the layouts
//! the plate grades equal (its days and loss depend on the shape and the tokens alone) the
//! search can put first the one a real run would choose, and the report can show what the
//! plate's assumed MFU hides.
//!
//! The detailed grade uses the default stack ([`Stack::default`], Megatron-LM with Transformer
//! Engine, at its published calibration) and the step `check --memory detailed` grades when
//! no step flag is given ([`Step::default_for`]): one sequence a micro-batch, full
//! recomputation, sequence parallelism with TP, 1F1B, the global batch nearest the brief's
//! target. So the line the report prints for a plan is what
//! `trainplan check --memory detailed --time detailed` says of the same layout.

use serde::{Deserialize, Serialize};

use crate::brief::Brief;
use crate::cost::memory::MemoryModel;
use crate::cost::run::TimeModel;
use crate::cost::step::detailed::{Detailed, Options};
use crate::cost::step::stack::Stack;
use crate::cost::step::Step;
use crate::cost::step_time::options::TimeOptions;
use crate::error::Result;
use crate::model::layout::Layout;
use crate::model::Shape;
use crate::plan::limits::memory_fits;
use crate::units::gb;

/// A layout's grade under the detailed model with the default stack and step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DetailedGrade {
    /// The step graded.
    pub step: Step,
    /// Per-GPU memory of the fullest stage, bytes.
    pub bytes: f64,
    /// Days per token, failures included.
    pub days_per_token: f64,
    /// Derived MFU.
    pub mfu: f64,
}

/// `layout` of `shape` under the detailed model with the default stack and step, or why that
/// model cannot grade it (a batch no round of micro-batches comes near, a GPU without kernel
/// figures).
pub fn detailed_grade(brief: &Brief, shape: &Shape, layout: &Layout) -> Result<DetailedGrade> {
    let stack = Stack::default();
    let step = Step::default_for(layout, brief.seq_len, &brief.batch_target_for(shape), stack)?;
    let memory = MemoryModel::Detailed(Detailed {
        step,
        options: Options::for_stack(stack).on_gpu(brief.mxfp8),
    });
    let bytes = memory.memory(brief.seq_len, shape, layout)?.total();
    let time = TimeModel::Detailed(TimeOptions::for_stack(stack));
    let run = time
        .run_time(&brief.machine(), shape, layout, &memory, 1)?
        .expect("the detailed time model gives a run time");
    Ok(DetailedGrade {
        step,
        bytes,
        days_per_token: run.days_per_token,
        mfu: run.step.mfu,
    })
}

/// The runnable-first key of a graded layout: its days per token when it fits the brief's
/// cap under the detailed model, else +∞ (those come after, in the plate's own order).
pub fn runnable_key(brief: &Brief, grade: &Result<DetailedGrade>) -> f64 {
    match grade {
        Ok(g) if memory_fits(brief, g.bytes) => g.days_per_token,
        _ => f64::INFINITY,
    }
}

/// A plate plan under the detailed model: what the report shows beside the plate's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runnable {
    /// The software stack graded under.
    pub stack: Stack,
    /// The training step graded (`null` when none goes with the layout).
    pub step: Option<Step>,
    /// Per-GPU memory of the fullest stage, GB.
    pub memory_gb: Option<f64>,
    /// Whether that memory is within the brief's cap.
    pub fits: bool,
    /// Days for the plan's tokens, failures included.
    pub days: Option<f64>,
    /// Days per token: the search's runnable-first key among plans the plate grades equal.
    pub days_per_token: Option<f64>,
    /// Derived MFU.
    pub mfu: Option<f64>,
    /// Why the detailed model could not grade the plan, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl Runnable {
    /// The plan of `layout` of `shape` on `tokens` under the detailed model.
    pub fn of(brief: &Brief, shape: &Shape, layout: &Layout, tokens: u64) -> Runnable {
        let grade = detailed_grade(brief, shape, layout).map_err(|e| e.to_string());
        Runnable::from_grade(brief, &grade, tokens)
    }

    /// The plan on `tokens` of a layout already graded (`grade`, or why it could not be):
    /// what [`Runnable::of`] gives, without grading the layout again.
    pub fn from_grade(
        brief: &Brief,
        grade: &std::result::Result<DetailedGrade, String>,
        tokens: u64,
    ) -> Runnable {
        match grade {
            Ok(g) => Runnable {
                stack: Stack::default(),
                step: Some(g.step),
                memory_gb: Some(gb(g.bytes)),
                fits: memory_fits(brief, g.bytes),
                days: Some(tokens as f64 * g.days_per_token),
                days_per_token: Some(g.days_per_token),
                mfu: Some(g.mfu),
                refused: None,
            },
            Err(e) => Runnable {
                stack: Stack::default(),
                step: None,
                memory_gb: None,
                fits: false,
                days: None,
                days_per_token: None,
                mfu: None,
                refused: Some(e.clone()),
            },
        }
    }

    /// The runnable-first key ([`runnable_key`]) this plan was ranked by.
    pub fn key(&self) -> f64 {
        match self.days_per_token {
            Some(k) if self.fits => k,
            _ => f64::INFINITY,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::layout::ZeroStage;
    use crate::model::preset;

    #[test]
    fn the_plate_s_lightest_layout_is_slow_and_a_shallow_one_is_not() {
        // The finding: 70B at TP 8 × PP 64 × DP 4, ZeRO 3, which the plate ranks
        // first by memory, crawls under the detailed model; TP 8 × PP 1 × DP 256 runs.
        let b = Brief::default();
        let shape = preset("70b").unwrap();
        let zero3 = ZeroStage::new(3).unwrap();
        let deep = Layout::new(&b, &shape, 8, 64, zero3).unwrap();
        let shallow = Layout::new(&b, &shape, 8, 1, zero3).unwrap();
        let d = Runnable::of(&b, &shape, &deep, 4_960_000_000_000);
        let s = Runnable::of(&b, &shape, &shallow, 4_960_000_000_000);
        assert!(d.fits && s.fits);
        assert!(d.mfu.unwrap() < 0.2, "{d:?}");
        assert!(s.mfu.unwrap() > 0.3, "{s:?}");
        assert!(s.key() < d.key());
        // The key is the plan's days over its tokens, bit for bit.
        assert_eq!(s.days.unwrap(), 4.96e12 * s.key());
    }

    #[test]
    fn a_layout_the_detailed_model_cannot_grade_comes_last_with_its_reason() {
        // 4,096 GPUs at TP 1 × PP 1: one sequence a replica is already 32 Mi tokens, twice
        // the target and past the tolerance.
        let b = Brief {
            gpus: 4096,
            ..Brief::default()
        };
        let shape = preset("8b").unwrap();
        let l = Layout::new(&b, &shape, 1, 1, ZeroStage::new(3).unwrap()).unwrap();
        let r = Runnable::of(&b, &shape, &l, 1_000_000_000_000);
        assert_eq!(r.key(), f64::INFINITY);
        assert!(r.refused.unwrap().contains("global batch"));
    }
}
