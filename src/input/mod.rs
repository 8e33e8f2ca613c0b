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

pub mod from;
pub mod hf;
pub mod plan_file;
pub mod strict;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::brief::{Brief, BriefPatch};
use crate::cost::chip::calibration::{Calibration, PerStack};
use crate::cost::chip::efficiency::{EfficiencyCurve, Point};
use crate::error::{Error, Result};
use crate::format::thousands;
use crate::plan::calibrate::Runs;
use crate::search::shard::{Partial, PARTIAL_KIND, PARTIAL_SCHEMA_VERSION};
use strict::{Nulls, Strict};

/// A kind of input file, named in errors, and the most bytes trainplan reads of one: far more
/// than any real file of the kind, so a wrong path (`/dev/zero`, a model's weights) is refused
/// at once instead of read until memory runs out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// What the file is, for errors ("a brief").
    pub what: &'static str,
    /// The most bytes read.
    pub bytes: u64,
}

/// One mebibyte, 2^20 bytes.
pub const MIB: u64 = 1 << 20;

/// A brief file (`--brief`): 1 MiB (the default brief is 700 bytes of TOML).
pub const BRIEF: Limit = Limit {
    what: "a brief",
    bytes: MIB,
};
/// A Hugging Face `config.json` (`--model-config`): 1 MiB (Llama 3.1 405B's is 1 kB).
pub const HF_CONFIG: Limit = Limit {
    what: "a Hugging Face config.json",
    bytes: MIB,
};
/// An efficiency table (`--efficiency`): 1 MiB.
pub const EFFICIENCY: Limit = Limit {
    what: "an efficiency table",
    bytes: MIB,
};
/// A calibration file (`--calibration`): 1 MiB.
pub const CALIBRATION: Limit = Limit {
    what: "a calibration file",
    bytes: MIB,
};
/// A runs file (`calibrate RUNS.json`): 16 MiB (the published set is 90 kB).
pub const RUNS: Limit = Limit {
    what: "a runs file",
    bytes: 16 * MIB,
};
/// A plan, search or Pareto JSON (`export --plan`): 64 MiB.
pub const PLAN: Limit = Limit {
    what: "a plan, search or Pareto JSON",
    bytes: 64 * MIB,
};
/// A partial search result (`merge`): 1 GiB by default, raised by `merge --max-file-mb` for
/// the shards of very large sweeps.
pub const PARTIAL: Limit = Limit {
    what: "a partial search result",
    bytes: 1024 * MIB,
};

/// Reads a text file whole: a regular file (a directory, a device such as `/dev/zero` or a
/// FIFO is refused before it is opened, so nothing blocks), of at most `limit.bytes`, in UTF-8
/// (the parsers skip a leading byte-order mark, in files and request bodies alike). A file
/// that breaks any of these is an [`Error::Io`] that says which.
pub fn read_text(path: &Path, limit: Limit) -> Result<String> {
    use std::io::Read;
    let fail = |source: std::io::Error| Error::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    };
    let invalid = |why: String| fail(std::io::Error::new(std::io::ErrorKind::InvalidInput, why));
    let meta = std::fs::metadata(path).map_err(fail)?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a device, FIFO or socket)"
        };
        return Err(invalid(format!(
            "{kind}; {} is read from a file",
            limit.what
        )));
    }
    let too_big = |size: u64| {
        invalid(format!(
            "{} bytes or more, more than the {} {} may have",
            thousands(size),
            size_name(limit.bytes),
            limit.what
        ))
    };
    if meta.len() > limit.bytes {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit.bytes + 1).read_to_end(&mut bytes))
        .map_err(fail)?;
    if bytes.len() as u64 > limit.bytes {
        return Err(too_big(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|_| {
        fail(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

/// `bytes` in the largest binary unit that divides it: `1 MiB`, `64 MiB`, `1 GiB`.
fn size_name(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes % (1 << 30) == 0 {
        format!("{} GiB", bytes >> 30)
    } else if bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{} bytes", thousands(bytes))
    }
}

/// Reads a JSON document of type `T` from `path`, a file of `limit`'s kind, strictly
/// ([`parse_json`]); errors name the file and the path of the field that was wrong
/// (`topology.hbm_gbps: invalid type …`).
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path, limit: Limit) -> Result<T> {
    parse_json(&read_text(path, limit)?, path, limit.what)
}

/// Parses a JSON document of type `T` under the strict discipline of [`strict`]: an object
/// where an object is meant, each key once, no `null`; `kind` names it in errors.
pub fn parse_json<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
    kind: &str,
) -> Result<T> {
    parse_json_with(text, path, kind, Nulls::Refused)
}

/// [`parse_json`], with `null` read as [`Nulls`] says.
pub fn parse_json_with<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
    kind: &str,
    nulls: Nulls,
) -> Result<T> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(Strict::new(&mut de, nulls))
        .map_err(|e| parse_error(path, kind, &e.path().to_string(), e.inner()))?;
    de.end().map_err(|e| parse_error(path, kind, ".", &e))?;
    Ok(value)
}

/// A value of type `T` read from a JSON `value` already parsed (strictly) out of the file at
/// `path`, under the same discipline; errors name the field but no line, since the value's
/// place in the file is gone.
pub fn from_value<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
    path: &Path,
    kind: &str,
) -> Result<T> {
    serde_path_to_error::deserialize(Strict::new(value, Nulls::Refused))
        .map_err(|e| parse_error(path, kind, &e.path().to_string(), e.inner()))
}

/// The line and column, from 1, of byte `offset` of `text` (columns in characters): where a
/// TOML reader's span starts.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Parses a TOML document of type `T` under the discipline of [`strict`]; errors name the
/// field and the line and column.
pub fn parse_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
    kind: &str,
) -> Result<T> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(Strict::new(de, Nulls::Refused)).map_err(|e| {
        let inner = e.inner();
        let at = inner.span().map_or(String::new(), |span| {
            let (line, column) = line_column(text, span.start);
            format!(" at line {line} column {column}")
        });
        let message = format!("{}{at}", inner.message().trim().replace('\n', ": "));
        parse_error(path, kind, &e.path().to_string(), &message)
    })
}

fn parse_error(path: &Path, kind: &str, field: &str, why: &dyn std::fmt::Display) -> Error {
    // A key refused before it is known (given twice, say) ends the path as `?`; the message
    // names the key.
    let field = field.trim_end_matches('?').trim_end_matches('.');
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
    let patch = brief_patch(&read_text(path, BRIEF)?, path, toml)?;
    Ok(patch.apply(brief))
}

/// The partial search result in the JSON file at `path` (`merge`), of at most `max_bytes`: it
/// is trainplan's own document, where `null` is documented (a shape with no window, `top` for
/// every plan), so `null` reads as absent, and no key it does not write is taken.
pub fn partial(path: &Path, max_bytes: u64) -> Result<Partial> {
    let limit = Limit {
        bytes: max_bytes,
        ..PARTIAL
    };
    parse_partial(&read_text(path, limit)?, path)
}

/// A partial search result's JSON `text` (see [`partial`]); `path` names it in errors. A key
/// that `search --shard` does not write, at any depth, is refused by its path
/// ([`Nulls::Own`]). What the values say is checked by [`Partial::check`] when `merge` reads
/// them.
pub fn parse_partial(text: &str, path: &Path) -> Result<Partial> {
    // The version first, so a file of another version is named as such, not as a bad field.
    #[derive(Deserialize)]
    struct Version {
        kind: Option<String>,
        schema_version: Option<u64>,
    }
    let stripped = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Ok(Version {
        kind: Some(kind),
        schema_version: Some(v),
    }) = serde_json::from_str::<Version>(stripped)
    {
        if kind == PARTIAL_KIND && v != u64::from(PARTIAL_SCHEMA_VERSION) {
            return Err(Error::invalid(
                format!("{}: schema_version", path.display()),
                v,
                format!(
                    "{PARTIAL_SCHEMA_VERSION}, this trainplan's partial format: run the shard again with this version"
                ),
            ));
        }
    }
    let mut partial: Partial = parse_json_with(text, path, PARTIAL.what, Nulls::Own)?;
    partial.source = path.display().to_string();
    Ok(partial)
}

/// A calibration file (`--calibration FILE`, written by `trainplan calibrate`): the calibrated
/// parameters, an efficiency table for the eager stack, or both, and what the fit recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationFile {
    /// Fraction of benchmarked kernel throughput kept in a step, pooled over stacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained: Option<f64>,
    /// Stacks' own values (each needs `sustained` beside it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<PerStack>,
    /// The host's time for one local expert's launches ([`crate::cost::step::graphs`]),
    /// seconds; the published fit where absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_expert: Option<f64>,
    /// The eager stack's efficiency table (the file `--efficiency` read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points: Option<Vec<Point>>,
    /// What the fit was made from and how well it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitRecord>,
}

/// What `trainplan calibrate` records beside the parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitRecord {
    /// The runs file fitted to.
    pub runs_file: String,
    /// Runs fitted.
    pub runs: u64,
    /// Mean absolute error before the fit, MFU points.
    pub mae_before: f64,
    /// Mean absolute error after it.
    pub mae_after: f64,
}

/// A calibration file read and checked: the parameters and the curve it gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibrated {
    /// The parameters, if the file gives them.
    pub calibration: Option<Calibration>,
    /// The eager stack's curve, if the file gives one.
    pub efficiency: Option<EfficiencyCurve>,
}

impl FitRecord {
    /// What a fit can have recorded: at least one run, and mean absolute errors that are
    /// distances, finite and at least 0; the error names `path`.
    pub fn check(&self, path: &Path) -> Result<()> {
        let field = |name: &str| format!("{}: fit.{name}", path.display());
        if self.runs == 0 {
            return Err(Error::invalid(
                field("runs"),
                0,
                "at least 1: trainplan calibrate fits one run or more",
            ));
        }
        for (name, v) in [
            ("mae_before", self.mae_before),
            ("mae_after", self.mae_after),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::invalid(
                    field(name),
                    v,
                    "a mean absolute error in MFU points: finite and at least 0",
                ));
            }
        }
        Ok(())
    }
}

/// The calibration in the JSON file at `path` (`--calibration FILE`): at least one of
/// `sustained` and `points`, each checked, and what the fit recorded
/// ([`FitRecord::check`]).
pub fn calibration(path: &Path) -> Result<Calibrated> {
    parse_calibration(&read_text(path, CALIBRATION)?, path)
}

/// A calibration file's JSON `text` (see [`calibration`]); `path` names it in errors.
pub fn parse_calibration(text: &str, path: &Path) -> Result<Calibrated> {
    let file: CalibrationFile = parse_json(text, path, CALIBRATION.what)?;
    if let Some(fit) = &file.fit {
        fit.check(path)?;
    }
    if file.sustained.is_none() && file.points.is_none() {
        return Err(Error::invalid(
            "--calibration",
            path.display(),
            "a file with \"sustained\" (from trainplan calibrate) or \"points\" (an efficiency table)",
        ));
    }
    let calibration = match (file.sustained, file.stacks) {
        (Some(sustained), stacks) => {
            let c = Calibration {
                sustained,
                stacks: stacks.unwrap_or_default(),
                host_expert: file
                    .host_expert
                    .unwrap_or(crate::cost::chip::calibration::PUBLISHED_HOST_EXPERT),
            };
            c.validate()?;
            Some(c)
        }
        (None, Some(_)) => {
            return Err(Error::invalid(
                "calibration.stacks",
                path.display(),
                "\"sustained\" beside it, the value of the stacks it does not name",
            ))
        }
        (None, None) if file.host_expert.is_some() => {
            return Err(Error::invalid(
                "calibration.host_expert",
                path.display(),
                "\"sustained\" beside it: the calibrated parameters come together",
            ))
        }
        (None, None) => None,
    };
    let efficiency = file.points.map(EfficiencyCurve::new).transpose()?;
    Ok(Calibrated {
        calibration,
        efficiency,
    })
}

/// A runs file (`trainplan calibrate RUNS.json`): the published-runs format, nulls read as
/// absent, fields the model does not use ignored. What each run measured is checked when it is
/// graded ([`crate::plan::calibrate::Run::predict`]), against its card.
pub fn runs(path: &Path) -> Result<Runs> {
    parse_runs(&read_text(path, RUNS)?, path)
}

/// A runs file's JSON `text` (see [`runs`]); `path` names it in errors.
pub fn parse_runs(text: &str, path: &Path) -> Result<Runs> {
    parse_json_with(text, path, RUNS.what, Nulls::Absent)
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
    let file: CurveFile = read_json(path, EFFICIENCY)?;
    EfficiencyCurve::new(file.points)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calibration_file_s_host_floor_comes_with_sustained_and_within_its_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let alone = write(
            "alone.json",
            r#"{"points": [{"width": 4096, "efficiency": 0.55}], "host_expert": 0.0005}"#,
        );
        let e = calibration(&alone).err().unwrap().to_string();
        assert!(e.contains("calibration.host_expert"), "{e}");
        let beside = write(
            "beside.json",
            r#"{"sustained": 0.8, "host_expert": 0.0005}"#,
        );
        let c = calibration(&beside).unwrap().calibration.unwrap();
        assert_eq!(c.host_expert, 0.0005);
        // Milliseconds where seconds are meant: out of bounds, named.
        let ms = write("ms.json", r#"{"sustained": 0.8, "host_expert": 0.5}"#);
        let e = calibration(&ms).err().unwrap().to_string();
        assert!(e.contains("calibration.host_expert = 0.5"), "{e}");
    }

    #[test]
    fn a_calibration_file_s_fit_record_is_what_a_fit_can_record() {
        let path = Path::new("fit.json");
        let file = |fit: &str| format!("{{\"sustained\": 0.8, \"fit\": {fit}}}");
        let good = r#"{"runs_file": "runs.json", "runs": 37, "mae_before": 1.2, "mae_after": 1.1}"#;
        assert!(parse_calibration(&file(good), path).is_ok());
        for (fit, error) in [
            (
                r#"{"runs_file": "runs.json", "runs": 0, "mae_before": 1.2, "mae_after": 1.1}"#,
                "invalid fit.json: fit.runs = 0: at least 1: trainplan calibrate fits one run or more",
            ),
            (
                r#"{"runs_file": "runs.json", "runs": 37, "mae_before": -1, "mae_after": 1.1}"#,
                "invalid fit.json: fit.mae_before = -1: a mean absolute error in MFU points: finite and at least 0",
            ),
        ] {
            let e = parse_calibration(&file(fit), path).unwrap_err().to_string();
            assert_eq!(e, error);
        }
    }
}
