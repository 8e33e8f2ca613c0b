//! Exporters: one small trait that turns results into text, one module per format.
//!
//! Reports (text, JSON), tables of plans (CSV, Markdown) and launcher configurations for one
//! plan (Megatron-LM, DeepSpeed, torchtitan) are all [`Exporter`]s; a format that has no
//! sense for a kind of result says so as an error.

use crate::check::CheckReport;
use crate::error::{Error, Result};
use crate::search::{Ranked, SearchReport};
use std::io;

mod columns;
mod csv;
mod deepspeed;
mod json;
pub mod launch;
mod markdown;
mod megatron;
mod text;
mod torchtitan;

use columns::Table;
pub use csv::Csv;
pub use deepspeed::DeepSpeed;
pub use json::{Json, SCHEMA_VERSION};
pub use launch::Launch;
pub use markdown::Markdown;
pub use megatron::Megatron;
pub use text::{brief_lines, Text};
pub use torchtitan::Torchtitan;

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

impl<T: Launcher> Exporter for T {
    fn check(&self, report: &CheckReport) -> Result<String> {
        self.render(&Launch::from_check(report)?)
    }
    fn write_search(&self, _: &SearchReport, _: &dyn Ranked, _: &mut dyn io::Write) -> Result<()> {
        Err(one_plan(T::NAME))
    }
    fn front(&self, _: &SearchReport) -> Result<String> {
        Err(one_plan(T::NAME))
    }
    fn launch(&self, launch: &Launch) -> Result<String> {
        self.render(launch)
    }
    fn side_notes(&self, launch: &Launch) -> Vec<String> {
        Launcher::side_notes(self, launch)
    }
    fn media_type(&self) -> &'static str {
        T::MEDIA_TYPE
    }
}

/// The formats there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// For people, on a terminal.
    Text,
    /// For programs: the JSON contract.
    Json,
    /// A table of plans for spreadsheets.
    Csv,
    /// A table of plans for documents.
    Markdown,
    /// Megatron-LM `pretrain_gpt.py` arguments.
    Megatron,
    /// A DeepSpeed `ds_config.json`.
    DeepSpeed,
    /// A torchtitan job TOML.
    Torchtitan,
}

impl Format {
    /// The exporter for this format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Text => Box::new(Text),
            Format::Json => Box::new(Json),
            Format::Csv => Box::new(Table(Csv)),
            Format::Markdown => Box::new(Table(Markdown)),
            Format::Megatron => Box::new(Megatron),
            Format::DeepSpeed => Box::new(DeepSpeed),
            Format::Torchtitan => Box::new(Torchtitan),
        }
    }

    /// The launcher format named `name`, as its [`Launcher::NAME`].
    pub fn launcher_named(name: &str) -> Option<Format> {
        [
            (Format::Megatron, Megatron::NAME),
            (Format::DeepSpeed, DeepSpeed::NAME),
            (Format::Torchtitan, Torchtitan::NAME),
        ]
        .into_iter()
        .find_map(|(format, n)| (n == name).then_some(format))
    }

    /// Whether this format writes a launcher configuration for one plan.
    pub fn is_launcher(self) -> bool {
        matches!(
            self,
            Format::Megatron | Format::DeepSpeed | Format::Torchtitan
        )
    }
}

/// The error of a launcher format asked for many plans.
fn one_plan(format: &str) -> Error {
    Error::invalid(
        "--format",
        format,
        "a report format for a search (a launcher configuration is for one plan: use `trainplan export`)",
    )
}

/// The error of a report format asked for a launcher configuration.
fn not_a_launcher(format: &str) -> Error {
    Error::invalid(
        "--format",
        format,
        "megatron, deepspeed or torchtitan for a launcher configuration",
    )
}
