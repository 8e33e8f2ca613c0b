//! Markdown: a GitHub-flavoured table of plans, rounded for reading, for an issue or a design
//! document.

use std::io;

use super::columns::Columns;
use super::launch::Launch;
use super::Exporter;
use crate::check::CheckReport;
use crate::error::Result;
use crate::plan::Plan;
use crate::search::{Ranked, SearchReport};

/// A Markdown table.
#[derive(Debug, Clone, Copy, Default)]
pub struct Markdown;

/// A cell with `|` escaped so it cannot end the cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The plans as a Markdown table, numbers right-aligned.
pub fn plans(plans: &[Plan]) -> String {
    let mut out = Vec::new();
    write_plans(&plans, &mut out).expect("a Vec takes every write");
    String::from_utf8_lossy(&out).into_owned()
}

/// One row of cells.
fn line<'a>(cells: impl IntoIterator<Item = &'a str>) -> String {
    let cells: Vec<String> = cells.into_iter().map(cell).collect();
    format!("| {} |\n", cells.join(" | "))
}

/// The plans as a Markdown table, written row by row as they are walked; the alignment row
/// follows the first row's numbers.
fn write_plans(plans: &dyn Ranked, out: &mut dyn io::Write) -> io::Result<()> {
    let mut walk = plans.walk().peekable();
    let columns = Columns::of(walk.peek());
    let header = columns.header();
    let mut rows = walk.enumerate().map(|(i, p)| columns.row(i as u64 + 1, &p));
    let first = rows.next();
    let numeric: Vec<bool> = first
        .as_ref()
        .map(|r| r.iter().map(|c| c.numeric).collect())
        .unwrap_or_default();
    let mut head = format!("| {} |\n|", header.join(" | "));
    for i in 0..header.len() {
        head.push_str(if numeric.get(i).copied().unwrap_or(false) {
            " ---: |"
        } else {
            " --- |"
        });
    }
    head.push('\n');
    out.write_all(head.as_bytes())?;
    for row in first.into_iter().chain(rows) {
        out.write_all(line(row.iter().map(|c| c.shown.as_str())).as_bytes())?;
    }
    Ok(())
}

impl Exporter for Markdown {
    fn check(&self, report: &CheckReport) -> Result<String> {
        Ok(plans(std::slice::from_ref(&report.plan)))
    }
    fn write_search(
        &self,
        _: &SearchReport,
        plans: &dyn Ranked,
        out: &mut dyn io::Write,
    ) -> Result<()> {
        super::written(write_plans(plans, out))
    }
    fn front(&self, report: &SearchReport) -> Result<String> {
        Ok(plans(&report.front))
    }
    fn launch(&self, _: &Launch) -> Result<String> {
        Err(super::not_a_launcher("markdown"))
    }
}
