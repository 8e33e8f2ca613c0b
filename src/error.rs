//! The one error type of the library.
//!
//! Every error is a single line that names the offending input and the value it had, so the
//! command-line tool can print it as it is and exit with status 2. A plan that fails a check is
//! *not* an error: it is a [`crate::plan::Plan`] whose `pass` is false and whose reasons say why.

use std::path::PathBuf;

/// Why an input was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A number (flag, brief field, or computed setting) outside its valid range.
    #[error("invalid {field} = {}: {expected}", one_line(value))]
    Invalid {
        /// The flag (`--top`) or the brief field (`brief.mfu`, set by a file or by `--mfu`).
        field: String,
        /// The value the user gave, as text.
        value: String,
        /// What a valid value looks like.
        expected: String,
    },
    /// A layout that breaks the layout rules for this cluster and shape.
    #[error("invalid layout: {0}")]
    Layout(String),
    /// A model name that is not one of the known shapes.
    #[error("unknown model '{}': expected one of {known}", one_line(name))]
    UnknownModel {
        /// What the user asked for.
        name: String,
        /// The names that exist, comma separated.
        known: String,
    },
    /// A file that could not be read or written.
    #[error("cannot {action} '{}': {source}", one_line(&path.display().to_string()))]
    Io {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A model the planner cannot represent (a mixture of experts, another architecture).
    #[error("cannot plan '{}': {}", one_line(&path.display().to_string()), one_line(reason))]
    Unsupported {
        /// The file that describes it.
        path: PathBuf,
        /// What is not supported and what is.
        reason: String,
    },
    /// Every problem of one input at once (a launch script's refused options), one line each
    /// after a heading: the one error of more than one line.
    #[error("{}", problems(.0))]
    Problems(Vec<String>),
    /// A file that was read but is not a valid document of the expected kind.
    #[error("cannot parse '{}': {}", one_line(&path.display().to_string()), one_line(message))]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, on one line.
        message: String,
    },
}

/// One problem as its line; several under a heading, one a line.
fn problems(lines: &[String]) -> String {
    match lines {
        [one] => one.clone(),
        _ => format!(
            "{} lines, every problem at once:\n  {}",
            lines.len(),
            lines.join("\n  ")
        ),
    }
}

impl Error {
    /// The input or rule an error is about: an [`Error::Invalid`]'s field, `layout` for the
    /// layout rules, `input` otherwise.
    pub fn rule_name(&self) -> &str {
        match self {
            Error::Invalid { field, .. } => field,
            Error::Layout(_) => "layout",
            _ => "input",
        }
    }

    /// Shorthand for [`Error::Invalid`].
    pub fn invalid(
        field: impl Into<String>,
        value: impl ToString,
        expected: impl Into<String>,
    ) -> Self {
        Error::Invalid {
            field: field.into(),
            value: value.to_string(),
            expected: expected.into(),
        }
    }
}

impl Error {
    /// The error with an [`Error::Invalid`]'s field renamed by `rename`, given the field's last
    /// part (`kv_heads` of `model.kv_heads`): a shape's checks name its own fields, and a reader
    /// of a file or flags says the user's names for them. Other errors are as they are.
    pub fn renamed(self, rename: impl FnOnce(&str) -> String) -> Error {
        match self {
            Error::Invalid {
                field,
                value,
                expected,
            } => {
                let last = field.rsplit_once('.').map_or(field.as_str(), |(_, l)| l);
                Error::Invalid {
                    field: rename(last),
                    value,
                    expected,
                }
            }
            other => other,
        }
    }
}

/// Checks numbers that must be finite, positive (or zero where `zero_ok`) and at most `max`;
/// the error names `prefix` + the field and its value.
pub(crate) fn check_numbers(prefix: &str, fields: &[(&str, f64, bool)], max: f64) -> Result<()> {
    for &(name, v, zero_ok) in fields {
        let ok = v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0)) && v <= max;
        if !ok {
            let low = if zero_ok { "≥ 0" } else { "> 0" };
            let expected = if max.is_finite() {
                format!("a number {low}, at most {}", crate::format::general(max))
            } else {
                format!("a finite number {low}")
            };
            return Err(Error::invalid(
                format!("{prefix}{name}"),
                crate::format::exact(v),
                expected,
            ));
        }
    }
    Ok(())
}

/// `text` with control characters (a newline in a file name, say) escaped, so an error stays
/// on one line.
fn one_line(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.escape_debug().to_string()
    } else {
        text.to_string()
    }
}

/// The library's result type.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_is_one_line_even_with_a_newline_in_the_input() {
        let errors = [
            Error::UnknownModel {
                name: "7b\nx".into(),
                known: "8b".into(),
            },
            Error::Io {
                action: "read",
                path: "a\nb.json".into(),
                source: std::io::ErrorKind::NotFound.into(),
            },
            Error::Parse {
                path: "p.json".into(),
                message: "line 1\nline 2".into(),
            },
            Error::invalid("--model", "x\ny", "a name"),
        ];
        for e in errors {
            let text = e.to_string();
            assert_eq!(text.lines().count(), 1, "{text}");
        }
    }

    #[test]
    fn an_invalid_value_names_the_field_the_value_and_what_is_expected() {
        let e = Error::invalid("brief.gpus", 0, "a whole number ≥ 1");
        assert_eq!(e.to_string(), "invalid brief.gpus = 0: a whole number ≥ 1");
    }
}
