//! The two traits every format implements: [`Exporter`] for any result, [`Launcher`] for a
//! launcher configuration of one plan (every launcher is an exporter that refuses many plans).

use std::io;

use super::launch::Launch;
use crate::error::{Error, Result};
use crate::plan::check::CheckReport;
use crate::search::{Ranked, SearchReport};

/// Turns results into the bytes of one format.
pub trait Exporter {
    /// One graded design and its fixes.
    fn check(&self, report: &CheckReport) -> Result<String>;
    /// A whole search written to `out` as it is made: the brief, the budget, the verdict per
    /// shape and the ranked `plans`, walked from the report's own list or made one at a time
    /// (`search --all`), so no format holds them all.
    fn write_search(
        &self,
        report: &SearchReport,
        plans: &dyn Ranked,
        out: &mut dyn io::Write,
    ) -> Result<()>;
    /// A whole search with the report's own plans, as text.
    fn search(&self, report: &SearchReport) -> Result<String> {
        let mut out = Vec::new();
        self.write_search(report, &report.plans.as_slice(), &mut out)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
    /// The Pareto front of a search.
    fn front(&self, report: &SearchReport) -> Result<String>;
    /// A launcher configuration for one plan.
    fn launch(&self, launch: &Launch) -> Result<String>;
    /// What a user should know beside `launch`'s configuration that the file itself cannot
    /// say, one line each (none for most formats).
    fn side_notes(&self, _launch: &Launch) -> Vec<String> {
        Vec::new()
    }
    /// The media type of a launcher configuration.
    fn media_type(&self) -> &'static str {
        "text/plain; charset=utf-8"
    }
}

/// A launcher configuration's format: one plan in, one file out. Every launcher is an
/// [`Exporter`] that writes the configuration of a checked design and refuses many plans.
pub trait Launcher {
    /// The format's name, as `--format` takes it.
    const NAME: &'static str;
    /// The media type of its file.
    const MEDIA_TYPE: &'static str = "text/plain; charset=utf-8";
    /// The configuration for `launch`.
    fn render(&self, launch: &Launch) -> Result<String>;
    /// Lines for the user beside the file, for a format whose file cannot carry comments.
    fn side_notes(&self, _launch: &Launch) -> Vec<String> {
        Vec::new()
    }
}

/// Refuses a plan graded on a stack no public launcher runs: `deepseek`, DeepSeek's own
/// (HAI-LLM as the V3 report describes it), whose DualPipe pairing and settings no launcher's
/// file would reproduce.
fn launched(name: &str, launch: &Launch) -> Result<()> {
    use crate::cost::step::stack::Stack;
    if launch.detailed && launch.options.stack == Stack::DeepSeek {
        return Err(crate::error::Error::invalid(
            "--format",
            name,
            "a plan on a stack a public launcher runs: the deepseek stack is DeepSeek's own (HAI-LLM, as the V3 report describes it), which no launcher's file reproduces; grade the plan on --stack megatron-te or torchtitan to write one",
        ));
    }
    // A hybrid model: Megatron-core builds it (its `MambaModel`, `pretrain_mamba.py`); the
    // other launchers have no Mamba-2 layers.
    if let (Some(hybrid), false) = (&launch.shape.hybrid, name == "megatron") {
        return Err(crate::error::Error::invalid(
            "--format",
            name,
            format!(
                "a model the launcher's file can build: {} is a hybrid of Mamba-2 and attention blocks ({}), which --format megatron writes (Megatron-core's MambaModel) and this launcher has no layers for",
                launch.shape.name, hybrid.pattern
            ),
        ));
    }
    Ok(())
}

impl<T: Launcher> Exporter for T {
    fn check(&self, report: &CheckReport) -> Result<String> {
        let launch = Launch::from_check(report)?;
        launched(T::NAME, &launch)?;
        self.render(&launch)
    }
    fn write_search(&self, _: &SearchReport, _: &dyn Ranked, _: &mut dyn io::Write) -> Result<()> {
        Err(one_plan(T::NAME))
    }
    fn front(&self, _: &SearchReport) -> Result<String> {
        Err(one_plan(T::NAME))
    }
    fn launch(&self, launch: &Launch) -> Result<String> {
        launched(T::NAME, launch)?;
        self.render(launch)
    }
    fn side_notes(&self, launch: &Launch) -> Vec<String> {
        Launcher::side_notes(self, launch)
    }
    fn media_type(&self) -> &'static str {
        T::MEDIA_TYPE
    }
}

/// The error of a launcher format asked for many plans.
pub(super) fn one_plan(format: &str) -> Error {
    Error::invalid(
        "--format",
        format,
        "a report format for a search (a launcher configuration is for one plan: use `trainplan export`)",
    )
}

/// The error of a report format asked for a launcher configuration.
pub(super) fn not_a_launcher(format: &str) -> Error {
    Error::invalid(
        "--format",
        format,
        "megatron, deepspeed or torchtitan for a launcher configuration",
    )
}
