//! Markdown: a GitHub-flavoured table of plans, rounded for reading, for an issue or a design
//! document.

use super::columns::table;
use super::launch::Launch;
use super::Exporter;
use crate::check::CheckReport;
use crate::error::Result;
use crate::plan::Plan;
use crate::search::SearchReport;

/// A Markdown table.
#[derive(Debug, Clone, Copy, Default)]
pub struct Markdown;

/// A cell with `|` escaped so it cannot end the cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The plans as a Markdown table, numbers right-aligned.
pub fn plans(plans: &[Plan]) -> String {
    let (header, rows) = table(plans);
    let numeric: Vec<bool> = rows
        .first()
        .map(|r| r.iter().map(|c| c.numeric).collect())
        .unwrap_or_default();
    let mut out = format!("| {} |\n|", header.join(" | "));
    for i in 0..header.len() {
        out.push_str(if numeric.get(i).copied().unwrap_or(false) {
            " ---: |"
        } else {
            " --- |"
        });
    }
    out.push('\n');
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| cell(&c.shown)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

impl Exporter for Markdown {
    fn check(&self, report: &CheckReport) -> Result<String> {
        Ok(plans(std::slice::from_ref(&report.plan)))
    }
    fn search(&self, report: &SearchReport) -> Result<String> {
        Ok(plans(&report.plans))
    }
    fn front(&self, report: &SearchReport) -> Result<String> {
        Ok(plans(&report.front))
    }
    fn launch(&self, _: &Launch) -> Result<String> {
        Err(super::not_a_launcher("markdown"))
    }
}
