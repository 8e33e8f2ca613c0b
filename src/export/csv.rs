//! CSV (RFC 4180): a table of plans with every digit, for spreadsheets and dataframes.

use std::io;

use super::columns::Columns;
use super::launch::Launch;
use super::Exporter;
use crate::check::CheckReport;
use crate::error::Result;
use crate::plan::Plan;
use crate::search::{Ranked, SearchReport};

/// Comma-separated values, a header line then one line a plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct Csv;

/// A field, quoted when it holds a comma, a quote or a line break (RFC 4180 §2).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One line of cells, ended by CRLF as RFC 4180 asks.
fn line<'a>(cells: impl IntoIterator<Item = &'a str>) -> String {
    let cells: Vec<String> = cells.into_iter().map(field).collect();
    cells.join(",") + "\r\n"
}

/// The plans as CSV.
pub fn plans(plans: &[Plan]) -> String {
    let mut out = Vec::new();
    write_plans(&plans, &mut out).expect("a Vec takes every write");
    String::from_utf8_lossy(&out).into_owned()
}

/// The plans as CSV, written line by line as they are walked.
fn write_plans(plans: &dyn Ranked, out: &mut dyn io::Write) -> io::Result<()> {
    let mut walk = plans.walk().peekable();
    let columns = Columns::of(walk.peek());
    out.write_all(line(columns.header()).as_bytes())?;
    for (i, p) in walk.enumerate() {
        let row = columns.row(i as u64 + 1, &p);
        out.write_all(line(row.iter().map(|c| c.exact.as_str())).as_bytes())?;
    }
    Ok(())
}

impl Exporter for Csv {
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
        Err(super::not_a_launcher("csv"))
    }
}

#[cfg(test)]
mod tests {
    use super::field;

    #[test]
    fn fields_are_quoted_only_when_they_must_be() {
        assert_eq!(field("llama3-70b"), "llama3-70b");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
