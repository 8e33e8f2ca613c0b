//! The command line: clap's definitions, and their translation into the library's inputs.
//! Nothing outside this module sees clap.
//!
//! Each flag's doc comment is its `--help` text, where `[default: …]` is clap's convention, not
//! a link.
//!
//! This file holds the commands and the flags of the small ones (`serve`, `completions`,
//! `calibrate`); the other flags have a file each, by what they describe, their types
//! re-exported here: `brief.rs` the brief, `design.rs` one design (the model, tokens and layout
//! `check` and `export` take), `family.rs` a search's family of shapes, `step.rs` the training
//! step, `memory.rs` and `time.rs` the models of memory and time, `check.rs` the `check` and
//! `export` commands, `search.rs` the `search` and `merge` commands, and `parse.rs` the values
//! flags share.
#![allow(rustdoc::broken_intra_doc_links)]

mod brief;
mod check;
mod design;
mod family;
mod memory;
mod parse;
mod search;
mod step;
mod time;

pub use brief::{BriefArgs, BriefCommandArgs, BriefFormat, LawArg, SpendArgs};
pub use check::{CheckArgs, CheckFormat, ExportArgs, LauncherFormat};
pub use design::{AttentionArgs, DesignArgs, ModelArgs};
pub use family::FamilyArgs;
pub use memory::{
    DetailedArgs, DispatcherArg, GradientArg, KernelsArg, LossArg, MasterArg, MemoryArg,
    MoeRecomputeArg, OptimizerArg, StagesArg, StatesArg,
};
pub use parse::OnOff;
pub use search::{
    DistinctArg, FrontFormat, MergeArgs, OutputArgs, RankArg, ReportFormat, SearchArgs,
};
pub use step::{CheckStepArgs, RecomputeArg, SearchStepArgs};
pub use time::{TimeArg, TimeArgs};

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::cost::step::stack::Stack;
use parse::stack_parser;

const EXAMPLES: &str = "\
Examples:
  trainplan search                                  answer the default brief (SPEC.md)
  trainplan search --models 70b,405b --rank days    two shapes, fastest plans first
  trainplan search --pareto front.json              also write the Pareto front
  trainplan search --json --gpus 1024 --max-days 60 another cluster, as JSON
  trainplan check --model 70b --tokens 15e12 --tp 1 --pp 1 --zero 0
  trainplan check --model 70b --tokens 4.96e12 --tp 8 --pp 1 --zero 3 --json
  trainplan search --model-config config.json --gpu h200 --plot loss.svg
  trainplan check --model 70b --tokens 4.96e12 --tp 8 --pp 8 --zero 1 --plot memory.svg
  trainplan check --model 70b --tokens 4.96e12 --tp 8 --zero 3 --sensitivity
  trainplan export --format megatron --model 70b --tokens 4.96e12 --tp 8 --pp 8 --zero 1
  trainplan brief --print --gpu b200 > brief.toml    start a brief file
  trainplan completions bash                        shell completions

Exit status: 0 yes (passes), 1 no (fails), 2 bad input (one line on stderr).";

/// Plan a large language-model training run: model size, tokens and parallel layout that fit
/// in memory, finish in time and reach a loss target.
#[derive(Debug, Parser)]
#[command(name = "trainplan", version, after_help = EXAMPLES, allow_negative_numbers = true)]
pub struct Cli {
    /// Print results only: no progress bar, no notes on stderr (errors still are).
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value = "8080")]
    pub port: u16,
    /// Address to listen on. Only loopback by default: another address exposes the page and
    /// its API to the network.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
}

/// `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Grade one design: memory per GPU, days and loss, each PASS or FAIL, and what would fix it.
    /// Exit status 0 when every check passes, 1 when one fails, 2 for bad input.
    #[command(allow_negative_numbers = true)]
    Check(Box<CheckArgs>),
    /// Search every (shape, tokens, TP, PP, ZeRO): verdict per shape, ranked plans, Pareto
    /// front. Exit status 0 when some plan passes, 1 when none does, 2 for bad input.
    #[command(allow_negative_numbers = true)]
    Search(Box<SearchArgs>),
    /// Combine the partial results of `search --shard I/N` into the report one run gives.
    Merge(MergeArgs),
    /// Write a launcher configuration (Megatron-LM, DeepSpeed, torchtitan) for one plan: from
    /// a plan JSON (--plan) or from the same flags as check. Exit status 0 when the plan
    /// passes, 1 when it fails (the configuration is still written), 2 for bad input.
    #[command(allow_negative_numbers = true)]
    Export(Box<ExportArgs>),
    /// Fit the detailed model's calibrated parameters to measured runs (the format of
    /// data/published/runs.json), print each run's error before and after, and write the fit
    /// for --calibration. Exit status 0, or 2 for bad input.
    Calibrate(CalibrateArgs),
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell.
    Completions(CompletionsArgs),
    /// Serve the workshop: a page where a design is graded as its controls move, driven by
    /// this engine, on http://127.0.0.1:8080/ (prints the address; Ctrl-C stops).
    Serve(ServeArgs),
    /// Show the effective brief (the default, a file, a GPU preset and flags, in that order);
    /// with --print write it whole as TOML or JSON to start a brief file from. Exit status 0,
    /// or 2 when it is not valid.
    #[command(allow_negative_numbers = true)]
    Brief(Box<BriefCommandArgs>),
}

/// `calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The measured runs, JSON {"runs": [...]} as in data/published/runs.json.
    #[arg(value_name = "RUNS.json")]
    pub runs: PathBuf,
    /// Fit only the runs graded under this stack [default: every run].
    #[arg(long, value_name = "NAME", value_parser = stack_parser())]
    pub stack: Option<Stack>,
    /// Write the fit here (atomically), for --calibration FILE.
    #[arg(long, short, value_name = "FILE.json")]
    pub output: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
