//! The plain-text table: columns two spaces apart, each as wide as its widest cell, and the
//! PASS or FAIL its checks show.

/// Columns two spaces apart, each line indented: each column as wide as its widest cell, so
/// every row is measured before any is laid out.
#[derive(Default)]
pub(super) struct Columns {
    widths: Vec<usize>,
    left: Vec<bool>,
}

impl Columns {
    /// Widens the columns to hold `cells`.
    pub(super) fn measure<S: AsRef<str>>(&mut self, cells: &[S]) {
        if self.widths.len() < cells.len() {
            self.widths.resize(cells.len(), 0);
        }
        for (w, cell) in self.widths.iter_mut().zip(cells) {
            *w = (*w).max(cell.as_ref().chars().count());
        }
    }

    /// Keeps the first `n` columns (a row's cells past the header's are not shown), aligned as
    /// `align` says: one letter per column, `l` left-aligned, anything else right-aligned.
    pub(super) fn finish(mut self, n: usize, align: &str) -> Self {
        self.widths.truncate(n);
        self.left = align.chars().map(|c| c == 'l').collect();
        self
    }

    /// One line of `cells`.
    pub(super) fn line<S: AsRef<str>>(&self, cells: &[S], indent: &str) -> String {
        let mut out = String::from(indent);
        for (i, (cell, w)) in cells.iter().zip(&self.widths).enumerate() {
            let cell = cell.as_ref();
            if i > 0 {
                out.push_str("  ");
            }
            let pad = w - cell.chars().count();
            if self.left.get(i).copied().unwrap_or(false) {
                out.push_str(cell);
                out.extend(std::iter::repeat_n(' ', pad));
            } else {
                out.extend(std::iter::repeat_n(' ', pad));
                out.push_str(cell);
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    }
}

/// Lays out rows in columns two spaces apart, each line indented by `indent`. `align` has one
/// letter per column: `l` left-aligned, anything else right-aligned.
pub(super) fn table(header: &[&str], rows: &[Vec<String>], align: &str, indent: &str) -> String {
    let mut columns = Columns::default();
    columns.measure(header);
    rows.iter().for_each(|row| columns.measure(row));
    let columns = columns.finish(header.len(), align);
    let mut out = columns.line(header, indent);
    for row in rows {
        out.push_str(&columns.line(row, indent));
    }
    out
}

/// A check's verdict in a word: PASS or FAIL.
pub(super) fn verdict_word(pass: bool) -> &'static str {
    if pass {
        "PASS"
    } else {
        "FAIL"
    }
}
