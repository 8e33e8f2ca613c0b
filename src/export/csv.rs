//! CSV (RFC 4180): a table of plans with every digit, for spreadsheets and dataframes.

use super::columns::table;
use super::launch::Launch;
use super::Exporter;
use crate::check::CheckReport;
use crate::error::Result;
use crate::plan::Plan;
use crate::search::SearchReport;

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

/// The plans as CSV, lines ended by CRLF as RFC 4180 asks.
pub fn plans(plans: &[Plan]) -> String {
    let (header, rows) = table(plans);
    let mut out = header.join(",") + "\r\n";
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| field(&c.exact)).collect();
        out.push_str(&cells.join(","));
        out.push_str("\r\n");
    }
    out
}

impl Exporter for Csv {
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
