//! One design graded or written out: the flags of `check` and of `export`, and their formats.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::design::DesignArgs;
use super::parse::parse_whole;
use crate::error::{Error, Result};
use crate::report::export::Format;

/// `check`: one design, graded.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print the plan object as JSON instead of the report (same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Output format: the report, the plan as JSON, a one-row CSV or Markdown table, or a
    /// launcher configuration for the plan.
    #[arg(long, value_enum, default_value = "text")]
    pub format: CheckFormat,
    /// The torchtitan release `--format torchtitan` writes for: 0.2.2's job TOML, or 0.3's
    /// command line (a named config of its llama3 registry and `--section.key` overrides).
    #[arg(long, value_enum, value_name = "VERSION", default_value = "0.2.2")]
    pub torchtitan_version: TorchtitanVersion,
    /// Also draw the plan's memory per GPU by component against the cap, as SVG (written
    /// atomically); with --sensitivity, a tornado chart of days instead.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Also grade the design with each uncertain input at the low and the high end of its
    /// range, the others as given: the plate's MFU (0.75× to 1.25×), or the detailed model's
    /// calibration (0.9× to 1.1×), TP, PP and DP overlaps (0 to 1), failure rate (0.5× to 2×)
    /// and restart minutes (5 to 30); a table of days, MFU and verdict at each end (text and
    /// JSON).
    #[arg(long)]
    pub sensitivity: bool,
    /// Grade a launcher's configuration: a Megatron-LM argument list (the shell array `export`
    /// writes, a script or a file of arguments), a torchtitan job TOML, or a DeepSpeed JSON
    /// with the model (--model-config) and the layout (--tp, --pp), which its JSON lacks.
    /// Flags the file also sets must agree with it; what it cannot map is named, not guessed
    /// (docs/configs.md).
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    #[command(flatten)]
    pub script: ScriptArgs,
    /// Grade a plan from a JSON file as it was graded there: `check --json` output, or a
    /// search's JSON or Pareto file (with --index), under the file's brief, step and settings.
    /// The design flags are refused beside it (--model-config names the plan's model).
    #[arg(long, value_name = "FILE.json", conflicts_with = "from")]
    pub plan: Option<PathBuf>,
    /// Which plan of a search's `plans` (or a Pareto file's `front`), from 1.
    #[arg(long, value_name = "N", default_value = "1", value_parser = parse_whole, requires = "plan")]
    pub index: u64,
    #[command(flatten)]
    pub design: DesignArgs,
}

/// What a `--from` script leaves open, and whether to grade it without what is refused.
#[derive(Debug, Args, Clone, Default)]
pub struct ScriptArgs {
    /// With --from: a variable of the script (or its own argument, by number: `1=fp8`) holds
    /// VALUE wherever the script reads it, its own assignments to it passed over; repeatable.
    #[arg(long = "set", value_name = "NAME=VALUE", requires = "from", value_parser = crate::input::from::shell::Given::parse_var)]
    pub vars: Vec<(String, String)>,
    /// With --from: the `if` (or `case`) on LINE takes its `then`, `else` or N-th branch,
    /// where the script's values do not decide it; repeatable.
    #[arg(long = "branch", value_name = "LINE=BRANCH", requires = "from", value_parser = crate::input::from::shell::Given::parse_branch)]
    pub branches: Vec<(usize, String)>,
    /// With --from: grade the file without the options the design cannot say, listed in a
    /// note, instead of refusing it (exit 2) with every problem listed.
    #[arg(long, requires = "from")]
    pub lenient: bool,
}

impl ScriptArgs {
    /// The reader's options for a file read beside `gpus`.
    pub fn options(&self, gpus: Option<u64>) -> crate::input::from::Options {
        crate::input::from::Options {
            gpus,
            given: crate::input::from::shell::Given {
                vars: self.vars.clone(),
                branches: self.branches.clone(),
            },
            lenient: self.lenient,
        }
    }
}

impl CheckArgs {
    /// Refuses --sensitivity with a format that has no place for its table.
    pub fn check_sensitivity(&self) -> Result<()> {
        let table = self.json || matches!(self.format, CheckFormat::Text | CheckFormat::Json);
        if self.sensitivity && !table {
            return Err(sensitivity_format(self.format.to_possible_value()));
        }
        Ok(())
    }
}

/// The error of `--sensitivity` with a format (`value`) that cannot carry its table.
pub(super) fn sensitivity_format(value: Option<clap::builder::PossibleValue>) -> Error {
    let name = value.map_or_else(String::new, |v| v.get_name().to_string());
    Error::invalid(
        "--sensitivity",
        format!("with --format {name}"),
        "the text report or --json, which carry its table",
    )
}

/// `check --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// The report, for people.
    Text,
    /// The plan object (the JSON contract).
    Json,
    /// One CSV row under a header.
    Csv,
    /// A one-row Markdown table.
    Markdown,
    /// Megatron-LM pretrain_gpt.py arguments.
    Megatron,
    /// A DeepSpeed ds_config.json.
    Deepspeed,
    /// A torchtitan job TOML.
    Torchtitan,
}

/// `--torchtitan-version`: the torchtitan release a torchtitan file is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TorchtitanVersion {
    /// torchtitan 0.2.2: a job TOML (`--job.config_file`).
    #[value(name = "0.2.2")]
    V0_2_2,
    /// torchtitan 0.3: `--module llama3 --config NAME` and `--section.key` overrides.
    #[value(name = "0.3")]
    V0_3,
}

impl TorchtitanVersion {
    /// `format`, the torchtitan one for this release.
    pub fn of(self, format: Format) -> Format {
        match (format, self) {
            (Format::Torchtitan, TorchtitanVersion::V0_3) => Format::Torchtitan03,
            (format, _) => format,
        }
    }
}

impl CheckFormat {
    /// The library's format.
    pub fn format(self) -> Format {
        match self {
            CheckFormat::Text => Format::Text,
            CheckFormat::Json => Format::Json,
            CheckFormat::Csv => Format::Csv,
            CheckFormat::Markdown => Format::Markdown,
            CheckFormat::Megatron => Format::Megatron,
            CheckFormat::Deepspeed => Format::DeepSpeed,
            CheckFormat::Torchtitan => Format::Torchtitan,
        }
    }
}

/// `export`: a launcher configuration for one plan.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The launcher.
    #[arg(long, value_enum)]
    pub format: LauncherFormat,
    /// A plan as JSON: `check --json` output, or a search's JSON or Pareto file (with --index).
    /// Without it, the design flags below give the plan, as for `check`.
    #[arg(long, value_name = "FILE.json")]
    pub plan: Option<PathBuf>,
    /// The torchtitan release `--format torchtitan` writes for: 0.2.2's job TOML, or 0.3's
    /// command line (a named config of its llama3 registry and `--section.key` overrides).
    #[arg(long, value_enum, value_name = "VERSION", default_value = "0.2.2")]
    pub torchtitan_version: TorchtitanVersion,
    /// Which plan of a search's `plans` (or a Pareto file's `front`), from 1.
    #[arg(long, value_name = "N", default_value = "1", value_parser = parse_whole, requires = "plan")]
    pub index: u64,
    #[command(flatten)]
    pub design: DesignArgs,
}

/// `export --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LauncherFormat {
    /// Megatron-LM pretrain_gpt.py arguments, as a bash array.
    Megatron,
    /// A DeepSpeed ds_config.json.
    Deepspeed,
    /// A torchtitan job TOML.
    Torchtitan,
}

impl LauncherFormat {
    /// The library's format.
    pub fn format(self) -> Format {
        match self {
            LauncherFormat::Megatron => Format::Megatron,
            LauncherFormat::Deepspeed => Format::DeepSpeed,
            LauncherFormat::Torchtitan => Format::Torchtitan,
        }
    }
}
