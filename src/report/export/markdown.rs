//! Markdown: a GitHub-flavoured table of plans, rounded for reading, for an issue or a design
//! document.

use super::columns::{Cell, Style};

/// A Markdown table.
#[derive(Debug, Clone, Copy, Default)]
pub struct Markdown;

/// A cell with `|` escaped so it cannot end the cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// One row of cells.
fn line<'a>(cells: impl IntoIterator<Item = &'a str>) -> String {
    let cells: Vec<String> = cells.into_iter().map(cell).collect();
    format!("| {} |\n", cells.join(" | "))
}

/// Numbers right-aligned: the alignment row follows the first row's numbers.
impl Style for Markdown {
    const NAME: &'static str = "markdown";
    fn head(header: &[&str], first: Option<&[Cell]>) -> String {
        let numeric = |i: usize| first.and_then(|r| r.get(i)).is_some_and(|c| c.numeric);
        let mut head = format!("| {} |\n|", header.join(" | "));
        for i in 0..header.len() {
            head.push_str(if numeric(i) { " ---: |" } else { " --- |" });
        }
        head.push('\n');
        head
    }
    fn row(cells: &[Cell]) -> String {
        line(cells.iter().map(|c| c.shown.as_str()))
    }
}
