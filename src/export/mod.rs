//! Exporters: one small trait that turns results into text, one module per format.

use crate::check::CheckReport;
use crate::error::Result;
use crate::search::SearchReport;

mod json;
mod text;

pub use json::{Json, SCHEMA_VERSION};
pub use text::{brief_lines, Text};

/// Turns results into the bytes of one format.
pub trait Exporter {
    /// One graded design and its fixes.
    fn check(&self, report: &CheckReport) -> Result<String>;
    /// A whole search: the brief, the budget, the verdict per shape and the ranked plans.
    fn search(&self, report: &SearchReport) -> Result<String>;
    /// The Pareto front of a search.
    fn front(&self, report: &SearchReport) -> Result<String>;
}

/// The formats there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// For people, on a terminal.
    Text,
    /// For programs: the JSON contract.
    Json,
}

impl Format {
    /// The exporter for this format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Text => Box::new(Text),
            Format::Json => Box::new(Json),
        }
    }
}
