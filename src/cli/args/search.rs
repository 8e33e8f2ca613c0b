//! A search's flags: what it searches, how its plans are ranked and written, and the `merge`
//! that combines a sharded search's parts.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::brief::BriefArgs;
use super::check::sensitivity_format;
use super::family::FamilyArgs;
use super::memory::{DetailedArgs, MemoryArg};
use super::parse::parse_whole;
use super::step::SearchStepArgs;
use super::time::{TimeArg, TimeArgs};
use crate::brief::Brief;
use crate::cost::chip::stack_chip;
use crate::cost::step::stack::VSchedules;
use crate::error::{Error, Result};
use crate::input::hf;
use crate::model::{self, Shape};
use crate::report::export::Format;
use crate::search::rank::{Distinct, Rank};
use crate::search::{MemorySpace, SearchOptions, TokenGrid};

/// `--distinct`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DistinctArg {
    /// Every plan: each token count of each configuration a row.
    Plan,
    /// One row per (shape, layout, training step), at its best token count.
    Layout,
    /// One row per shape, at its best plan.
    Shape,
}

/// `--rank`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RankArg {
    /// Lowest predicted loss first.
    Loss,
    /// Fewest days first.
    Days,
    /// Least memory per GPU first.
    Memory,
    /// Least cost first (needs --price-per-gpu-hour; orders as days, every layout holding
    /// the brief's GPUs).
    Cost,
    /// Least training plus inference FLOPs over the model's life first (needs
    /// --inference-tokens; Sardana et al. 2024).
    Lifetime,
}

/// Where and how a search's result is written (`search` and `merge`).
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Print the whole result as JSON instead of the report (same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Output format: the report, the JSON document, or the ranked plans as a CSV or Markdown
    /// table.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
    /// Also draw predicted loss against days for the shapes, with the loss target, the day
    /// limit and the Pareto front marked, as SVG (written atomically).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// Write the Pareto front on (loss, days) to FILE (written atomically), or to stdout with
    /// `-`, in which case the report goes to stderr.
    #[arg(long, value_name = "FILE")]
    pub pareto: Option<PathBuf>,
    /// Format of the Pareto front.
    #[arg(long, value_enum, default_value = "json")]
    pub pareto_format: FrontFormat,
}

/// `merge`: the partial results of a sharded search, combined.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The partial files written by `search --shard I/N`, one for each shard.
    #[arg(required = true, value_name = "PARTIAL.json")]
    pub files: Vec<PathBuf>,
    /// The largest partial file read, MiB: raise it for the shards of a very large sweep (a
    /// shard's file grows by about 2.3 kB a shape)
    #[arg(long, value_name = "MIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub max_file_mb: u64,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Format of the `--pareto` output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FrontFormat {
    /// The JSON contract (`schema_version`, `brief`, `objectives`, `front`).
    Json,
    /// An aligned table.
    Text,
    /// A CSV table of the front's plans.
    Csv,
    /// A Markdown table of the front's plans.
    Markdown,
}

impl FrontFormat {
    /// The library's format.
    pub fn format(self) -> Format {
        match self {
            FrontFormat::Json => Format::Json,
            FrontFormat::Text => Format::Text,
            FrontFormat::Csv => Format::Csv,
            FrontFormat::Markdown => Format::Markdown,
        }
    }
}

/// Format of a search's or merge's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// The report, for people.
    Text,
    /// The search document (the JSON contract).
    Json,
    /// The ranked plans as CSV.
    Csv,
    /// The ranked plans as a Markdown table.
    Markdown,
}

impl OutputArgs {
    /// The format of the result.
    pub fn format(&self) -> Format {
        if self.json {
            return Format::Json;
        }
        match self.format {
            ReportFormat::Text => Format::Text,
            ReportFormat::Json => Format::Json,
            ReportFormat::Csv => Format::Csv,
            ReportFormat::Markdown => Format::Markdown,
        }
    }
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Shapes to search, comma separated: presets or dimension names [default: 8b,70b,405b
    /// unless --model-config or --ffn names the models].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub models: Vec<String>,
    /// A Hugging Face config.json to search; repeat it to search several models together.
    #[arg(long, value_name = "config.json")]
    pub model_config: Vec<PathBuf>,
    /// First token count of the grid.
    #[arg(long, value_name = "D", default_value = "1e10", value_parser = parse_whole)]
    pub tokens_min: u64,
    /// Last token count of the grid (inclusive).
    #[arg(long, value_name = "D", default_value = "5e13", value_parser = parse_whole)]
    pub tokens_max: u64,
    /// Step of the token grid.
    #[arg(long, value_name = "D", default_value = "1e10", value_parser = parse_whole)]
    pub tokens_step: u64,
    /// Order of the listed plans.
    #[arg(long, value_enum, default_value = "loss")]
    pub rank: RankArg,
    /// How many plans to list.
    #[arg(long, value_name = "K", default_value = "10", value_parser = parse_whole)]
    pub top: u64,
    /// What a listed row stands for: every plan, one row per (shape, layout, step) at its
    /// best token count, or one per shape. Given by name, it thins the Pareto front the same
    /// way [default: layout; the front keeps every plan].
    #[arg(long, value_enum, value_name = "WHAT")]
    pub distinct: Option<DistinctArg>,
    /// List every passing plan instead of the top K (with --distinct layout or shape, every
    /// distinct choice), made one at a time in ranking order and written as made (the text
    /// table after a first pass sizes its columns), so memory does not grow with them.
    #[arg(long, conflicts_with = "top")]
    pub all: bool,
    /// Rank over every whole token count in each shape's exact window rather than over the
    /// grid, and add the exact Pareto front over them, as runs of consecutive counts (the
    /// counts and the grid's front are still reported).
    #[arg(long, conflicts_with = "all")]
    pub exact: bool,
    /// Aim at the best loss the brief's GPUs, days and memory reach instead of a target: a first
    /// search finds it (over every whole token count), and the search is made with it, rounded
    /// up to five decimals, as the loss target.
    /// (With --shard each shard would search every shape first: run the unsharded search's
    /// target as --loss-target instead.)
    #[arg(long, conflicts_with_all = ["loss_target", "shard"])]
    pub best_loss: bool,
    /// Also list, after the plans, the `check` command that grades each again as the search
    /// graded it, its whole step written out (the JSON gives every plan's as `check`).
    #[arg(long)]
    pub show_commands: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Also grade the first plan with each uncertain input at the low and the high end of its
    /// range (as `check --sensitivity` does), and run the whole search again at each end to
    /// say where another plan would rank first; with --plot, a tornado chart of the first
    /// plan's days instead of the loss–days chart.
    #[arg(long, conflicts_with_all = ["all", "shard"])]
    pub sensitivity: bool,
    /// Search only shard I of N (1 ≤ I ≤ N) of the shapes, and print its partial result as
    /// JSON for `trainplan merge`; for a batch scheduler's array job.
    #[arg(long, value_name = "I/N", conflicts_with_all = ["pareto", "json", "format", "plot"])]
    pub shard: Option<String>,
    /// Search around a launcher's configuration (as `check --from` reads it): its model the
    /// one shape, its GPUs and sequence length the brief's, its stack where it says one; the
    /// layouts and steps are the search's usual ones (docs/configs.md).
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    #[command(flatten)]
    pub script: super::check::ScriptArgs,
    #[command(flatten)]
    pub family: FamilyArgs,
    #[command(flatten)]
    pub step: SearchStepArgs,
    #[command(flatten)]
    pub detailed: DetailedArgs,
    #[command(flatten)]
    pub time: TimeArgs,
    /// Worker threads; 0 uses every core.
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_whole, help_heading = "Options")]
    pub threads: u64,
    #[command(flatten)]
    pub brief: BriefArgs,
}

impl SearchArgs {
    /// The shapes asked for, in the order given, each once: the presets (all three unless
    /// --models names some), then the family's.
    pub fn shapes(&self, brief: &Brief) -> Result<Vec<Shape>> {
        self.shapes_with(brief, &mut |_, _| Ok(()))
    }

    /// [`SearchArgs::shapes`], telling `step` how far a family's list has come
    /// ([`model::family::Family::shapes_with`]); an error from `step` stops it.
    pub fn shapes_with(
        &self,
        brief: &Brief,
        step: &mut dyn FnMut(u64, u64) -> Result<()>,
    ) -> Result<Vec<Shape>> {
        let mut shapes: Vec<Shape> = Vec::new();
        let adhoc = self.family.adhoc()?;
        if self.models.is_empty() && self.model_config.is_empty() && adhoc.is_none() {
            shapes = model::presets();
        }
        let named = self.models.iter().map(|name| model::preset(name));
        let configs = self.model_config.iter().map(|path| hf::read(path));
        for shape in named.chain(configs).chain(adhoc.map(Ok)) {
            Shape::push_new(&mut shapes, shape?);
        }
        let family = match self.family.family()? {
            Some(family) => Some(family),
            None => brief
                .family
                .as_ref()
                .map(|spec| spec.family())
                .transpose()?,
        };
        if let Some(family) = family {
            // A family shape with a named shape's dimensions is that shape: searched once. The
            // family's own shapes are distinct, so only the few named ones are compared.
            let named = shapes.len();
            for shape in family.shapes_with(step)? {
                if !shapes[..named].iter().any(|s| s.same_dimensions(&shape)) {
                    shapes.push(shape);
                }
            }
        }
        Ok(shapes)
    }

    /// The files the search reads: the brief, the models' configs, the efficiency table, the
    /// --from file.
    pub fn inputs(&self) -> Vec<&Path> {
        let mut inputs: Vec<&Path> = self.model_config.iter().map(PathBuf::as_path).collect();
        inputs.extend(self.from.as_deref());
        inputs.extend(self.brief.brief.as_deref());
        inputs.extend(self.time.inputs());
        inputs
    }

    /// Refuses --sensitivity with a format that has no place for it.
    pub fn check_sensitivity(&self) -> Result<()> {
        let table = matches!(self.output.format(), Format::Text | Format::Json);
        if self.sensitivity && !table {
            return Err(sensitivity_format(self.output.format.to_possible_value()));
        }
        // The CSV and Markdown tables have one row a plan and no place for its command.
        if self.show_commands && !table {
            let value = self.output.format.to_possible_value();
            let name = value.map(|v| v.get_name().to_string()).unwrap_or_default();
            return Err(Error::invalid(
                "--show-commands",
                format!("with --format {name}"),
                "the text report, or --json, whose plans carry theirs as check",
            ));
        }
        Ok(())
    }

    /// The worker threads asked for (0: every core).
    pub fn threads(&self) -> Result<usize> {
        usize::try_from(self.threads)
            .ok()
            .filter(|&n| n <= MAX_THREADS)
            .ok_or_else(|| {
                Error::invalid(
                    "--threads",
                    self.threads,
                    format!("0 (every core) to {MAX_THREADS}"),
                )
            })
    }

    /// The search options.
    pub fn options(&self, brief: &Brief) -> Result<SearchOptions> {
        let rank = match self.rank {
            RankArg::Loss => Rank::Loss,
            RankArg::Days => Rank::Days,
            RankArg::Memory => Rank::Memory,
            RankArg::Cost => Rank::Cost,
            RankArg::Lifetime => Rank::Lifetime,
        };
        rank.check_against("--rank", brief)?;
        if self.time.time == TimeArg::Detailed && self.detailed.memory == MemoryArg::Plate {
            return Err(Error::invalid(
                "--time",
                "detailed",
                "--time detailed together with --memory detailed, which defines the training step",
            ));
        }
        if self.time.time == TimeArg::Detailed {
            // A GPU without kernel figures is refused once, by name, not configuration by
            // configuration in silence.
            stack_chip(&brief.machine(), self.detailed.stack())?;
        }
        let memory = match self.detailed.options(self.step.given())? {
            None => MemorySpace::Plate,
            Some(options) => {
                let options = options.on_gpu(brief.mxfp8);
                let steps = self.step.steps(brief, options.stack)?;
                // The recipe and FP8 weights go with every precision searched (checked once,
                // by name), and a precision's default recipe reads as none.
                let mut options = options;
                for p in steps.iter().map(|s| s.precision) {
                    options = options.for_precision(p)?;
                }
                MemorySpace::Detailed {
                    steps,
                    interleave: self.step.interleave_all() && options.stack.settings().interleaving,
                    // By default, the V schedules the stack runs; listed, by name.
                    v_schedules: self.step.schedules.is_empty()
                        && options.stack.settings().v_schedules != VSchedules::None,
                    options,
                    // A listed batch is fixed; without one, each layout aims at the brief's.
                    batch: self
                        .step
                        .global_batch_tokens
                        .is_empty()
                        .then(|| crate::search::BatchAim::of(brief)),
                    parallel: self.step.parallel()?,
                    // Without a list, each layout's local batch's divisors too.
                    divisors: self.step.micro_batches.is_empty(),
                }
            }
        };
        if let MemorySpace::Detailed { steps, options, .. } = &memory {
            for p in steps.iter().map(|s| s.precision).filter(|p| p.is_narrow()) {
                crate::search::searchable_precision(brief, options.stack, p)?;
            }
        }
        let top = if self.all {
            None
        } else {
            let k = usize::try_from(self.top)
                .ok()
                .filter(|&k| k >= 1)
                .ok_or_else(|| Error::invalid("--top", self.top, "a whole number ≥ 1"))?;
            Some(k)
        };
        let distinct = match self.distinct.unwrap_or(DistinctArg::Layout) {
            DistinctArg::Plan => Distinct::Plan,
            DistinctArg::Layout => Distinct::Layout,
            DistinctArg::Shape => Distinct::Shape,
        };
        Ok(SearchOptions {
            distinct,
            distinct_front: self.distinct.is_some(),
            grid: TokenGrid::new(self.tokens_min, self.tokens_max, self.tokens_step)?,
            rank,
            top,
            memory,
            time: self.time.model(self.detailed.stack())?,
            exact: self.exact,
        })
    }
}

/// The most worker threads `--threads` accepts.
const MAX_THREADS: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{Cli, Command};
    use clap::Parser;

    #[test]
    fn models_are_deduplicated_in_order() {
        let cli =
            Cli::try_parse_from(["trainplan", "search", "--models", "405b,70b,405B"]).unwrap();
        let Command::Search(args) = cli.command else {
            panic!()
        };
        let names: Vec<String> = args
            .shapes(&Brief::default())
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["llama3-405b", "llama3-70b"]);
    }
}
