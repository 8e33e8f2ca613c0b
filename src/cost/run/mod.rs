//! What a whole run costs: its days — by 6ND at an assumed MFU ([`plate`]) or at the detailed
//! step's pace with failures ([`TimeModel`], [`reliability`]) — and its GPU-hours, money,
//! energy and emissions ([`spend`]). Uses every other part of [`crate::cost`].

pub mod plate;
pub mod reliability;
pub mod spend;
use crate::cost::memory::MemoryModel;
use crate::cost::run::reliability::Outage;
use crate::cost::step::detailed::Detailed;
use crate::cost::step::pipeline::StageKinds;
use crate::cost::step_time::micro_batch::MicroBatch;
use crate::cost::step_time::micro_batch::MicroBatchCache;
use crate::cost::step_time::options::TimeOptions;
use crate::cost::step_time::scheduled;
use crate::cost::step_time::scheduled_breakdown;
use crate::cost::step_time::stage::unsharded_in;
use crate::cost::step_time::stage::Unsharded;
use crate::cost::step_time::step_time_of;
use crate::cost::step_time::unscheduled_of;
use crate::cost::step_time::StepTime;
use crate::cost::step_time::Unscheduled;
use crate::cost::Machine;
use crate::error::Error;
use crate::error::Result;
use crate::model::layout::Layout;
use crate::model::Shape;
use crate::units::SECONDS_PER_DAY;
use serde::{Deserialize, Serialize};

/// How days are computed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeModel {
    /// 6ND at the brief's assumed MFU.
    Plate,
    /// The step's time derived from the layout, with failures.
    Detailed(TimeOptions),
}

/// What the detailed time model says of a design's run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunTime {
    /// The step.
    pub step: StepTime,
    /// Days of compute at the step's pace, failures aside.
    pub compute_days: f64,
    /// Days per token including failures: `step_seconds / (B · goodput · 86,400)`.
    pub days_per_token: f64,
    /// What failures cost.
    pub outage: Outage,
}

impl TimeModel {
    /// The run's time for `tokens`, or `None` under the plate model; an error if the time model
    /// needs a detailed step the memory model does not give, or the step does not fit.
    pub fn run_time(
        &self,
        machine: &Machine,
        shape: &Shape,
        layout: &Layout,
        memory: &MemoryModel,
        tokens: u64,
    ) -> Result<Option<RunTime>> {
        self.run_time_cached(machine, shape, layout, memory, tokens, None)
    }

    /// [`TimeModel::run_time`], taking each micro-batch's compute from `cache` when given
    /// (the same answer, worked out once for the configurations that share it).
    pub fn run_time_cached(
        &self,
        machine: &Machine,
        shape: &Shape,
        layout: &Layout,
        memory: &MemoryModel,
        tokens: u64,
        cache: Option<&mut MicroBatchCache>,
    ) -> Result<Option<RunTime>> {
        let TimeModel::Detailed(opts) = self else {
            return Ok(None);
        };
        let MemoryModel::Detailed(d) = memory else {
            return Err(Error::invalid(
                "--time",
                "detailed",
                "--time detailed together with --memory detailed, which defines the training step",
            ));
        };
        let micro_batch = match cache {
            Some(cache) => cache.get(machine, shape, layout, d, opts)?,
            None => MicroBatch::of(machine, shape, layout, d, opts)?,
        };
        let step = step_time_of(machine, shape, layout, d, opts, &micro_batch)?;
        run_of(machine, shape, d, step, tokens).map(Some)
    }

    /// The [`Unsharded`] part of the step `d` under `layout` in the pipeline `kinds`
    /// ([`Detailed::kinds`] of the layout), shared by every schedule of the step and every ZeRO
    /// stage and replica count of the layout's degrees, or `None` under the plate model; each
    /// micro-batch's compute from `cache`.
    pub fn unsharded_in(
        &self,
        machine: &Machine,
        shape: &Shape,
        layout: &Layout,
        d: &Detailed,
        kinds: &StageKinds,
        cache: &mut MicroBatchCache,
    ) -> Result<Option<Unsharded>> {
        let TimeModel::Detailed(opts) = self else {
            return Ok(None);
        };
        let micro_batch = cache.get(machine, shape, layout, d, opts)?;
        unsharded_in(machine, shape, layout, d, opts, &micro_batch, kinds).map(Some)
    }

    /// The [`Unscheduled`] part of the step from its [`Unsharded`] part ([`unscheduled_of`]),
    /// or `None` under the plate model.
    pub fn unscheduled_of(
        &self,
        machine: &Machine,
        layout: &Layout,
        d: &Detailed,
        part: &Unsharded,
    ) -> Option<Unscheduled> {
        let TimeModel::Detailed(opts) = self else {
            return None;
        };
        Some(unscheduled_of(machine, layout, d, opts, part))
    }

    /// [`RunTime::days_per_token`] of the step `d` from the [`Unscheduled`] part of a step
    /// that differs from it at most in its schedule, for a run whose failures leave `goodput`
    /// ([`Outage::goodput`], the same for every run of a shape on a machine): what
    /// [`TimeModel::run_time_on`] gives, without the rest of the run.
    pub fn days_per_token_on(
        &self,
        layout: &Layout,
        d: &Detailed,
        base: &Unscheduled,
        goodput: f64,
    ) -> Result<Option<f64>> {
        let TimeModel::Detailed(opts) = self else {
            return Ok(None);
        };
        let step_seconds = scheduled_breakdown(layout, d, opts, base)?.total();
        Ok(Some(days_per_token(step_seconds, d, goodput)))
    }

    /// [`TimeModel::run_time`] of the step `d` from the [`Unscheduled`] part of a step that
    /// differs from it at most in its schedule (the same answer; `d`'s stack must run its
    /// schedule, [`Detailed::schedule_allowed`]).
    pub fn run_time_on(
        &self,
        machine: &Machine,
        shape: &Shape,
        layout: &Layout,
        d: &Detailed,
        base: &Unscheduled,
        tokens: u64,
    ) -> Result<Option<RunTime>> {
        let TimeModel::Detailed(opts) = self else {
            return Ok(None);
        };
        let step = scheduled(layout, d, opts, base)?;
        run_of(machine, shape, d, step, tokens).map(Some)
    }
}

/// Days per token at the step time `step` of `d` when failures leave `goodput`:
/// `step_seconds / (B · goodput · 86,400)`.
fn days_per_token(step_seconds: f64, d: &Detailed, goodput: f64) -> f64 {
    step_seconds / d.step.global_batch_tokens as f64 / goodput / SECONDS_PER_DAY
}

/// The run of `tokens` at the step time `step`: its compute days, and its days per token with
/// the time failures cost.
fn run_of(
    machine: &Machine,
    shape: &Shape,
    d: &Detailed,
    step: StepTime,
    tokens: u64,
) -> Result<RunTime> {
    let compute_seconds = tokens as f64 / step.tokens_per_second;
    let outage = machine.reliability.outage(
        shape.params() + shape.mtp_params(),
        machine.cluster.gpus,
        compute_seconds,
    )?;
    let days_per_token = days_per_token(step.step_seconds, d, outage.goodput);
    Ok(RunTime {
        step,
        compute_days: compute_seconds / SECONDS_PER_DAY,
        days_per_token,
        outage,
    })
}
