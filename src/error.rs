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
    #[error("invalid {field} = {value}: {expected}")]
    Invalid {
        /// The flag or field, as the user wrote it (for example `--mfu` or `brief.mfu`).
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
    #[error("unknown model '{name}': expected one of {known}")]
    UnknownModel {
        /// What the user asked for.
        name: String,
        /// The names that exist, comma separated.
        known: String,
    },
    /// A file that could not be read or written.
    #[error("cannot {action} '{}': {source}", path.display())]
    Io {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A file that was read but is not a valid document of the expected kind.
    #[error("cannot parse '{}': {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, on one line.
        message: String,
    },
}

impl Error {
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

/// The library's result type.
pub type Result<T> = std::result::Result<T, Error>;
