//! CSV (RFC 4180): a table of plans with every digit, for spreadsheets and dataframes.

use super::columns::{Cell, Style};

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

impl Style for Csv {
    const NAME: &'static str = "csv";
    fn head(header: &[&str], _: Option<&[Cell]>) -> String {
        line(header.iter().copied())
    }
    fn row(cells: &[Cell]) -> String {
        line(cells.iter().map(|c| c.exact.as_str()))
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
