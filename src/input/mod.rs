//! **The input part**: every file and request body read from outside, turned into checked
//! values — brief files in JSON and TOML, Hugging Face `config.json` files ([`hf`]), plan files
//! ([`plan_file`]), efficiency tables, shard partials and the workshop's request bodies. Nothing
//! below this part reads a file: the parts below take values.
//!
//! Every error is one line naming the file and the field that was wrong, with the field's path
//! (`topology.hbm_gbps: invalid type …`), from serde_path_to_error.
//!
//! Uses every part below it (`report`, `search`, `plan`, `brief`, `cost`, `model`) and the
//! ground floor.

pub mod hf;
pub mod plan_file;

use std::path::Path;

use serde::Deserialize;

use crate::brief::{Brief, BriefPatch};
use crate::cost::efficiency::{EfficiencyCurve, Point};
use crate::error::{Error, Result};

/// Reads a text file whole; a missing file or one that is not UTF-8 is an [`Error::Io`].
pub fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a JSON document of type `T` from `path`; `kind` names it in the error ("a brief"),
/// with the path of the field that was wrong (`topology.hbm_gbps: invalid type …`).
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path, kind: &str) -> Result<T> {
    parse_json(&read_text(path)?, path, kind)
}

/// Parses a JSON document of type `T`; errors as [`read_json`]'s.
pub fn parse_json<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
    kind: &str,
) -> Result<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| parse_error(path, kind, &e.path().to_string(), e.inner()))?;
    de.end().map_err(|e| parse_error(path, kind, ".", &e))?;
    Ok(value)
}

/// Parses a TOML document of type `T`; errors name the field and the line and column.
pub fn parse_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
    kind: &str,
) -> Result<T> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let inner = e.inner();
        let at = inner.span().map_or(String::new(), |span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!(" at line {line} column {column}")
        });
        let message = format!("{}{at}", inner.message().trim().replace('\n', ": "));
        parse_error(path, kind, &e.path().to_string(), &message)
    })
}

fn parse_error(path: &Path, kind: &str, field: &str, why: &dyn std::fmt::Display) -> Error {
    let field = if field == "." || field.is_empty() {
        String::new()
    } else {
        format!("{field}: ")
    };
    Error::Parse {
        path: path.to_path_buf(),
        message: format!("not {kind}: {field}{why}"),
    }
}

/// A brief file's text as a patch, TOML when `toml`, else JSON; `path` names it in errors.
pub fn brief_patch(text: &str, path: &Path, toml: bool) -> Result<BriefPatch> {
    if toml {
        parse_toml(text, path, "a brief")
    } else {
        parse_json(text, path, "a brief")
    }
}

/// `brief` with the brief file at `path` laid over it: TOML when the name ends in `.toml`,
/// JSON otherwise, with the field names of [`Brief`] (any subset) and optionally `gpu`, a
/// [`crate::brief::gpu`] preset laid down before the file's other fields. Unknown fields are
/// refused, so a typo is not silently ignored.
pub fn brief_file(brief: Brief, path: &Path) -> Result<Brief> {
    let toml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    let patch = brief_patch(&read_text(path)?, path, toml)?;
    Ok(patch.apply(brief))
}

/// An efficiency table's file: `{"points": [{"width": …, "efficiency": …}, …]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CurveFile {
    points: Vec<Point>,
}

/// The efficiency curve in the JSON file at `path` (`--efficiency FILE`), checked by
/// [`EfficiencyCurve::new`].
pub fn efficiency_curve(path: &Path) -> Result<EfficiencyCurve> {
    let file: CurveFile = read_json(path, "an efficiency table")?;
    EfficiencyCurve::new(file.points)
}
