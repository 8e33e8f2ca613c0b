//! The human-readable report: aligned tables, thousands separators, PASS/FAIL with margins.
//!
//! This module is the [`Text`] exporter; each report it writes has a file of its own, and
//! what the reports share has one too:
//!
//! - `search.rs`: the search report, from the brief to the sensitivity;
//! - `check.rs`: the check report of one graded design;
//! - `front.rs`: the Pareto front, as a report of its own and as the search report's lines;
//! - `sensitivity.rs`: what moves a verdict, for a check and for a search;
//! - `plan_table.rs`: the plan table, its rows, header and alignment;
//! - `brief.rs`: what a report says of the brief;
//! - `table.rs`: columns two spaces apart, as wide as their widest cell.

mod brief;
mod check;
mod front;
mod plan_table;
mod search;
mod sensitivity;
mod table;

use std::io;

use super::exporter::Exporter;
use crate::error::Result;
use crate::plan::check::CheckReport;
use crate::search::{Ranked, SearchReport};

pub use brief::brief_lines;

/// Plain text for a terminal.
#[derive(Debug, Clone, Copy, Default)]
pub struct Text;

impl Exporter for Text {
    fn check(&self, r: &CheckReport) -> Result<String> {
        Ok(check::report(r))
    }

    fn write_search(
        &self,
        r: &SearchReport,
        plans: &dyn Ranked,
        sink: &mut dyn io::Write,
    ) -> Result<()> {
        search::write(r, plans, sink)
    }

    fn front(&self, r: &SearchReport) -> Result<String> {
        Ok(front::report(r))
    }

    fn launch(&self, _: &super::launch::Launch) -> Result<String> {
        Err(super::exporter::not_a_launcher("text"))
    }
}
