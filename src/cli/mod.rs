//! The command line: clap's flags ([`args`]) mapped to the library, one function per command,
//! the progress bars. Exit status 0 when the answer is yes (the design passes, some plan
//! passes), 1 when it is no, 2 for bad input.
//!
//! [`run`] takes the arguments and the writer the main output goes to (stdout for the binary,
//! a buffer for the Python package), so every caller gets the same bytes.

pub mod args;
mod commands;
mod from;

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::brief::Brief;
use crate::cost::chip::calibration::Calibration;
use crate::cost::memory::MemoryModel;
use crate::cost::step::stack::StageSplit;
use crate::cost::step::Schedule;
use crate::error::{Error, Result};
use crate::input::plan_file::PlanFile;
use crate::input::{self, CalibrationFile, FitRecord};
use crate::model::layout::Layout;
use crate::model::Shape;
use crate::plan::check::{check, CheckReport};
use crate::plan::Design;
use crate::plan::{self, calibrate};
use crate::report::export::Launch;
use crate::report::export::{brief_lines, Format};
use crate::report::output::{emit, quietly_closed, same_file, write_atomic, written};
use crate::report::plot;
use crate::report::validation;
use crate::search::progress::{self, Progress};
use crate::search::rank::Distinct;
use crate::search::sensitivity::sensitivity;
use crate::search::shard::{fingerprint, merge, Partial, Shard};
use crate::search::{search, search_all, search_listing, Ranked, SearchOptions, SearchReport};
use crate::serve;
use args::{
    BriefCommandArgs, BriefFormat, CalibrateArgs, CheckArgs, Cli, Command, CompletionsArgs,
    DesignArgs, ExportArgs, MergeArgs, OutputArgs, SearchArgs, ServeArgs,
};

/// Sweeps of at least this many shapes get a progress bar (on a terminal): about a second.
const LONG_SWEEP: u64 = 10_000;
/// Plans `search --all` writes before a bar counts them.
const MANY_PLANS: u64 = 1_000_000;
/// Candidate shapes of a family from which its list is drawn on a bar as it is made.
const LONG_FAMILY: u64 = 100_000;

/// The binary's `main`: the process's arguments, the main output on stdout.
pub fn main() -> ExitCode {
    let out = &mut io::stdout();
    match run(std::env::args_os(), out) {
        Ok(Outcome::Help(shown)) => {
            // clap prints its help and version itself, in colour where the terminal takes it.
            let _ = shown.print();
            ExitCode::SUCCESS
        }
        Ok(Outcome::Answer(true)) => ExitCode::SUCCESS,
        Ok(Outcome::Answer(false)) => ExitCode::from(1),
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}

/// What a command ended with, when its input was good.
#[derive(Debug)]
pub enum Outcome {
    /// `--help` or `--version`, nothing run: clap's message, to print (`print`) or to
    /// read (`render().to_string()`).
    Help(Box<clap::Error>),
    /// The command ran: true when the answer is yes (the design passes, some plan passes).
    Answer(bool),
}

/// Runs the command line `args` (the program's name first), writing the main output (the
/// report, the JSON, the launcher config, the front on `-`) to `out`; warnings and progress go
/// to stderr. `Err` is the one-line message of bad input, as the binary prints it (exit 2).
pub fn run<I, T>(args: I, out: &mut dyn Write) -> std::result::Result<Outcome, String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = match Cli::command().try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(e) if !e.use_stderr() => return Ok(Outcome::Help(Box::new(e))),
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            return Err(
                "error: a command is needed: check or search (trainplan --help lists them)".into(),
            );
        }
        Err(e) => return Err(one_line(&e.render().to_string())),
    };
    let mut cli = Cli::from_arg_matches(&matches).map_err(|e| one_line(&e.render().to_string()))?;
    expand_detailed(&mut cli.command);
    let read = match apply_from(&mut cli.command, cli.quiet) {
        Ok(read) => read,
        Err(e) => return Err(format!("error: {e}")),
    };
    let outcome = match &cli.command {
        Command::Check(args) => run_check(args, read.as_ref(), cli.quiet, out),
        Command::Search(args) => {
            let given = matches.subcommand_matches("search");
            run_search(args, given, cli.quiet, out)
        }
        Command::Merge(args) => run_merge(args, cli.quiet, out),
        Command::Export(args) => run_export(args, cli.quiet, out),
        Command::Calibrate(args) => run_calibrate(args, cli.quiet, out),
        Command::Completions(args) => run_completions(args, out),
        Command::Serve(args) => run_serve(args, cli.quiet, out),
        Command::Brief(args) => run_brief(args, out),
    };
    outcome
        .map(Outcome::Answer)
        .map_err(|e| format!("error: {e}"))
}

/// `--detailed` as the two flags it stands for, `--memory detailed --time detailed` (clap has
/// refused it beside either).
fn expand_detailed(command: &mut Command) {
    let (memory, time) = match command {
        Command::Check(args) => (&mut args.design.detailed.memory, &mut args.design.time),
        Command::Export(args) => (&mut args.design.detailed.memory, &mut args.design.time),
        Command::Search(args) => (&mut args.detailed.memory, &mut args.time),
        _ => return,
    };
    if time.detailed {
        *memory = args::MemoryArg::Detailed;
        time.time = args::TimeArg::Detailed;
    }
}

/// Lays a `--from` file over the flags of `check` or `search`, printing its notes on stderr
/// (unless quiet); what was read, for `check --json`'s `from`.
fn apply_from(command: &mut Command, quiet: bool) -> Result<Option<from::Read>> {
    let (path, options) = match command {
        Command::Check(args) => (
            args.from.clone(),
            args.script.options(args.design.brief.gpus),
        ),
        Command::Search(args) => (args.from.clone(), args.script.options(args.brief.gpus)),
        _ => (None, input::from::Options::default()),
    };
    let Some(path) = path else {
        return Ok(None);
    };
    let file = input::from::read_with(&path, &options)?;
    let read = from::Read::of(&file, &path);
    let shown = path.display().to_string();
    let refused = file.refused.clone();
    let mut notes = match command {
        Command::Check(args) => from::apply(&mut args.design, file, &shown)?,
        Command::Search(args) => from::apply_search(args, file, &shown)?,
        _ => Vec::new(),
    };
    if !refused.is_empty() {
        notes.push(format!(
            "note: --from {shown}: graded without what the design cannot say (--lenient): {}",
            refused.join("; ")
        ));
    }
    if !quiet {
        for note in notes {
            eprintln!("{note}");
        }
    }
    Ok(Some(read))
}

/// Clap's message on one line: the lines before its usage and help hints, joined.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes to the main output; a closed pipe ends the output quietly.
fn print(out: &mut dyn Write, text: &str) -> Result<()> {
    written(emit(out, text).map(|_| ()))
}

fn run_calibrate(args: &CalibrateArgs, quiet: bool, out: &mut dyn Write) -> Result<bool> {
    if let Some(out) = &args.output {
        refuse_overwrite("--output", out, &[args.runs.as_path()])?;
    }
    let file = input::runs(&args.runs)?;
    let wanted = args.stack;
    let mut runs = Vec::new();
    for r in &file.runs {
        if wanted.is_none_or(|s| r.stack().is_ok_and(|t| t == s)) && !r.power_capped() {
            runs.push(r);
        }
    }
    if runs.is_empty() {
        return Err(Error::invalid(
            "calibrate",
            args.runs.display(),
            "at least one run (not power-capped) of the stack asked for",
        ));
    }
    let old = Calibration::default();
    let new = calibrate::fit(&runs)?;
    let predict =
        |c: Calibration| -> Result<Vec<_>> { runs.iter().map(|r| r.predict(c, None)).collect() };
    let (before, after) = (predict(old)?, predict(new)?);
    if !quiet {
        print(
            out,
            &validation::calibration_text(&before, &after, old, new),
        )?;
    }
    if let Some(path) = &args.output {
        let b: Vec<_> = before.iter().collect();
        let a: Vec<_> = after.iter().collect();
        let record = CalibrationFile {
            sustained: Some(new.sustained),
            stacks: Some(new.stacks),
            host_expert: None,
            points: None,
            fit: Some(FitRecord {
                runs_file: args.runs.display().to_string(),
                runs: after.len() as u64,
                mae_before: validation::mae(&b),
                mae_after: validation::mae(&a),
            }),
        };
        let text = serde_json::to_string_pretty(&record)
            .map_err(|e| Error::invalid("calibration", "JSON", e.to_string()))?
            + "\n";
        write_atomic(path, text.as_bytes())?;
    }
    Ok(true)
}

fn run_brief(args: &BriefCommandArgs, out: &mut dyn Write) -> Result<bool> {
    let brief = args.brief.resolve()?;
    let text = match (args.print, args.format) {
        (false, _) => brief_lines(&brief),
        (true, BriefFormat::Toml) => brief.to_toml()?,
        (true, BriefFormat::Json) => {
            serde_json::to_string_pretty(&brief)
                .map_err(|e| Error::invalid("brief", "JSON", e.to_string()))?
                + "\n"
        }
    };
    print(out, &text)?;
    Ok(true)
}

/// The graded design the flags describe, with its sensitivity when asked.
fn grade(args: &DesignArgs, sensitivity: bool) -> Result<CheckReport> {
    let brief = args.brief.resolve()?;
    let shape = args.shape()?;
    if let (None, Some((flag, value))) = (&shape.experts, args.detailed.expert_flag()) {
        return Err(Error::invalid(
            flag,
            value,
            format!(
                "a mixture of experts: {} is dense (the flag sets how its experts run)",
                shape.name
            ),
        ));
    }
    let layout = Layout::with(&brief, &shape, args.degrees(), args.zero())?;
    let tokens = args.tokens()?;
    let time = args.time.model(args.detailed.stack())?;
    let mut design = Design {
        shape: &shape,
        tokens,
        layout,
        memory: args.memory(&brief)?,
        time: &time,
    };
    let mut report = match check(&brief, &design) {
        Ok(report) => report,
        Err(e) => {
            // Megatron-core runs interleaved chunks that the layers alone do not fill only
            // with the embedding and the loss counted as layers: without --stages, that
            // split, where it is accepted, and the report says so; else the even split's
            // refusal.
            let Some(memory) = counted_split(args, &shape, &layout, &design.memory) else {
                return Err(e);
            };
            let counted = Design { memory, ..design };
            let Ok(mut report) = check(&brief, &counted) else {
                return Err(e);
            };
            design = counted;
            report.notes.push(format!(
                "--schedule {}: {} layers do not fill {} chunks, which Megatron-core runs only with the embedding and the loss counted as layers (--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split): graded with that split, --stages llama3, one layer fewer on the first and the last stage",
                design.memory.step().map_or(Schedule::OneFOneB, |s| s.schedule),
                shape.layers,
                layout.pp * design.memory.step().map_or(1, |s| s.schedule.chunks())
            ));
            report
        }
    };
    if sensitivity {
        report.sensitivity = Some(plan::sensitivity::sensitivity(&brief, &design)?);
    }
    Ok(report)
}

/// The memory model with Megatron-core's embedding-and-loss split (`--stages llama3`) for an
/// interleaved step on the stack's even split, no `--stages` given, whose `PP × V` chunks the
/// `L` layers do not divide over and the `L + 2` units do; `None` otherwise.
fn counted_split(
    args: &DesignArgs,
    shape: &Shape,
    layout: &Layout,
    memory: &MemoryModel,
) -> Option<MemoryModel> {
    let MemoryModel::Detailed(d) = memory else {
        return None;
    };
    let chunks = layout.pp * d.step.schedule.chunks();
    let layers = u64::from(shape.layers);
    let divides = layers % chunks != 0 && (layers + 2) % chunks == 0;
    let even = d.options.stages == StageSplit::Even && args.detailed.stages.is_none();
    (divides && even && matches!(d.step.schedule, Schedule::Interleaved(_))).then(|| {
        let mut d = *d;
        d.options.stages = StageSplit::Llama3;
        MemoryModel::Detailed(d)
    })
}

/// `check --plan FILE --index N`: the plan of a JSON file graded as the file's command graded
/// it, under its brief (the flags' where the file carries none), its step and its settings.
fn grade_plan(
    args: &DesignArgs,
    path: &Path,
    index: u64,
    sensitivity: bool,
) -> Result<CheckReport> {
    let refuse = |flag: &str, why: &str| {
        Err(Error::invalid(
            flag,
            "given with --plan",
            format!("left out: {why} (with --plan: --model-config for the plan's model, and the brief's flags where the file has no brief)"),
        ))
    };
    if args.time.detailed {
        return refuse("--detailed", "the plan's models are the file's");
    }
    if let Some(flag) = args.design_flag() {
        return refuse(flag, "the plan's design is the file's");
    }
    // The detailed model's and the time model's flags are read only with their models, which
    // a plan file names: given here they would be dropped without a word.
    if args.detailed.options(false).is_err() {
        return refuse(
            "the detailed model's flags",
            "the plan's step and settings are the file's",
        );
    }
    if args.time.model(args.detailed.stack()).is_err() {
        return refuse(
            "the time model's flags",
            "the plan is graded at its stack's time options",
        );
    }
    let plan = PlanFile::read(path, index)?;
    let shape = plan.shape(args.model.model_config.as_deref())?;
    let brief = match &plan.brief {
        Some(brief) => {
            if args.brief.resolve()? != Brief::default() {
                return refuse(
                    "the brief's flags",
                    "the file carries the brief it was graded under",
                );
            }
            brief.clone()
        }
        None => args.brief.resolve()?,
    };
    let m = plan.graded_with(&shape, brief)?;
    let design = Design {
        shape: &shape,
        tokens: plan.fields.tokens,
        layout: m.layout,
        memory: m.memory,
        time: &m.time,
    };
    let mut report = check(&m.brief, &design)?;
    if sensitivity {
        report.sensitivity = Some(plan::sensitivity::sensitivity(&m.brief, &design)?);
    }
    Ok(report)
}

fn run_check(
    args: &CheckArgs,
    read: Option<&from::Read>,
    quiet: bool,
    out: &mut dyn Write,
) -> Result<bool> {
    if let Some(plot) = &args.plot {
        let mut inputs = args.design.inputs();
        inputs.extend(args.from.as_deref());
        inputs.extend(args.plan.as_deref());
        refuse_overwrite("--plot", plot, &inputs)?;
    }
    args.check_sensitivity()?;
    let report = match &args.plan {
        Some(path) => grade_plan(&args.design, path, args.index, args.sensitivity)?,
        None => grade(&args.design, args.sensitivity)?,
    };
    if let Some(path) = &args.plot {
        let svg = match &report.sensitivity {
            Some(s) => plot::tornado(s, &report.brief, &report.plan)?,
            None => plot::memory(&report)?,
        };
        write_atomic(path, svg.as_bytes())?;
    }
    let format = if args.json {
        Format::Json
    } else {
        args.torchtitan_version.of(args.format.format())
    };
    if format.is_launcher() {
        let launch = Launch::from_check(&report)?;
        print_launch(format, &launch, &report.plan.reasons, quiet, out)?;
    } else {
        let mut text = format.exporter().check(&report)?;
        if let (Format::Json, Some(read)) = (format, read) {
            text = read.add_to(&text)?;
        }
        print(out, &text)?;
    }
    Ok(report.plan.pass)
}

/// Writes a launcher configuration to stdout, and on stderr (unless quiet) the choices made
/// for the user and a warning, with the reasons, when the plan fails its checks (`reasons`
/// is empty when it passes).
fn print_launch(
    format: Format,
    launch: &Launch,
    reasons: &[String],
    quiet: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let exporter = format.exporter();
    let text = exporter.launch(launch)?;
    if !quiet {
        let mut err = io::stderr().lock();
        if !reasons.is_empty() {
            let _ = writeln!(
                err,
                "warning: this plan fails its checks ({}); the configuration is written as asked",
                reasons.join("; ")
            );
        }
        for line in exporter.side_notes(launch) {
            let _ = writeln!(err, "{line}");
        }
    }
    print(out, &text)
}

fn run_export(args: &ExportArgs, quiet: bool, out: &mut dyn Write) -> Result<bool> {
    let format = args.torchtitan_version.of(args.format.format());
    let Some(path) = &args.plan else {
        let report = grade(&args.design, false)?;
        let launch = Launch::from_check(&report)?;
        print_launch(format, &launch, &report.plan.reasons, quiet, out)?;
        return Ok(report.plan.pass);
    };
    let d = &args.design;
    if let Some(flag) = d.design_flag() {
        return Err(Error::invalid(
            flag,
            "given with --plan",
            "either a plan file or the design flags, not both (with --plan: --model-config for the plan's model, the brief's flags)",
        ));
    }
    let plan = PlanFile::read(path, args.index)?;
    let shape = plan.shape(d.model.model_config.as_deref())?;
    // The plan's own brief where the file carries one (search and Pareto documents), else the
    // flags'.
    let brief = match &plan.brief {
        Some(brief) => brief.clone(),
        None => d.brief.resolve()?,
    };
    let (launch, graded) = plan.launch(shape, brief)?;
    print_launch(format, &launch, &graded.reasons, quiet, out)?;
    Ok(graded.pass)
}

fn run_serve(args: &ServeArgs, quiet: bool, out: &mut dyn Write) -> Result<bool> {
    let address = std::net::SocketAddr::new(args.host, args.port);
    serve::serve(address, |bound| {
        // The address on stdout, so a script can read it; the rest on stderr.
        let _ = print(out, &format!("http://{bound}/\n"));
        if !quiet {
            if !bound.ip().is_loopback() {
                eprintln!("warning: serving on {bound}, beyond this machine: anyone who can reach it can use the page and its API");
            }
            eprintln!("trainplan serve: the workshop is at http://{bound}/ (Ctrl-C stops)");
        }
    })?;
    Ok(true)
}

fn run_completions(args: &CompletionsArgs, out: &mut dyn Write) -> Result<bool> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "trainplan", &mut script);
    print(out, &String::from_utf8_lossy(&script))?;
    Ok(true)
}

/// A bar that draws nowhere until given a target, counting `what` (a template's words).
fn hidden_bar(what: &str) -> ProgressBar {
    let bar = ProgressBar::hidden();
    let template = format!(
        "{{bar:40}} {{percent:>3}}% {{human_pos}}/{{human_len}} {what}, {{per_sec}}, ETA {{eta}}"
    );
    bar.set_style(ProgressStyle::with_template(&template).expect("the template is valid"));
    bar
}

/// Plans that `search --all` writes, counted on an indicatif bar as they are walked: drawn on
/// stderr when that is a terminal, stdout is not (the plans on a terminal show their own
/// progress) and there are many; each walk (the text table walks twice, first to size its
/// columns) is a pass of its own.
struct Written<'a> {
    plans: &'a dyn Ranked,
    bar: ProgressBar,
    passes: std::cell::Cell<u64>,
}

impl<'a> Written<'a> {
    /// `plans` counted on a bar, never drawn when `quiet`.
    fn new(plans: &'a dyn Ranked, quiet: bool) -> Self {
        let bar = hidden_bar("plans, pass {msg}");
        bar.set_length(plans.count());
        let terminal = io::stderr().is_terminal() && !io::stdout().is_terminal();
        if !quiet && terminal && plans.count() >= MANY_PLANS {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        Written {
            plans,
            bar,
            passes: std::cell::Cell::new(0),
        }
    }
}

impl Ranked for Written<'_> {
    fn count(&self) -> u64 {
        self.plans.count()
    }
    fn walk(&self) -> Box<dyn Iterator<Item = crate::plan::Plan> + '_> {
        self.passes.set(self.passes.get() + 1);
        self.bar.set_message(self.passes.get().to_string());
        self.bar.reset();
        Box::new(self.plans.walk().inspect(|_| self.bar.inc(1)))
    }
}

impl Drop for Written<'_> {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// An indicatif bar, fed by the search: drawn on stderr when that is a terminal and the sweep
/// is long, hidden otherwise.
struct Bar {
    bar: ProgressBar,
    quiet: bool,
}

impl Bar {
    /// A bar, never drawn when `quiet`.
    fn new(quiet: bool) -> Self {
        Bar {
            bar: hidden_bar("shapes"),
            quiet,
        }
    }
}

impl Progress for Bar {
    fn start(&self, total: u64) {
        self.bar.set_length(total);
        if !self.quiet && io::stderr().is_terminal() && total >= LONG_SWEEP {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }
    fn advance(&self, n: u64) {
        self.bar.inc(n);
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The shapes `args` names, a family's counted on a bar as they are made (drawn on stderr when
/// that is a terminal and the family is long) and stopped by [`progress::interrupt`], as a
/// search is.
fn family_shapes(args: &SearchArgs, brief: &Brief, quiet: bool) -> Result<Vec<Shape>> {
    let bar = hidden_bar("family shapes");
    let shapes = args.shapes_with(brief, &mut |done, total| {
        if done == 0 {
            bar.set_length(total);
            if !quiet && io::stderr().is_terminal() && total >= LONG_FAMILY {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
        }
        bar.set_position(done);
        if progress::interrupted() {
            return Err(Error::invalid(
                "shape family",
                format!("stopped at {done} of {total} candidate shapes"),
                "a list made to its end: an interrupt (Ctrl-C) stopped it",
            ));
        }
        Ok(())
    });
    bar.finish_and_clear();
    shapes
}

/// `search`; `given`, its flags as clap read them, makes each listed plan's `check` command.
fn run_search(
    args: &SearchArgs,
    given: Option<&ArgMatches>,
    quiet: bool,
    out: &mut dyn Write,
) -> Result<bool> {
    let brief = args.brief.resolve()?;
    let shapes = family_shapes(args, &brief, quiet)?;
    let options = args.options(&brief)?;
    if let crate::search::MemorySpace::Detailed { parallel, .. } = &options.memory {
        parallel.experts.check(&shapes)?;
    }
    let shard = args.shard.as_deref().map(Shard::parse).transpose()?;
    if shard.is_some() {
        crate::search::shardable(&brief, "--critical-batch")?;
    }
    check_output(&args.output, &args.inputs())?;
    args.check_sensitivity()?;

    let bar = Bar::new(quiet);
    let progress: &dyn Progress = &bar;
    let threads = args.threads()?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::invalid("--threads", args.threads, e.to_string()))?;
    let brief = if args.best_loss {
        best_loss(brief, &shapes, &options, &pool, quiet)?
    } else {
        brief
    };
    if let Some(shard) = shard {
        let indices: Vec<usize> = (0..shapes.len()).filter(|&i| shard.takes(i)).collect();
        let mine: Vec<_> = indices.iter().map(|&i| shapes[i].clone()).collect();
        // A shard keeps its whole front; the merge thins it, if asked.
        let whole = SearchOptions {
            distinct_front: false,
            ..options.clone()
        };
        let mut report = pool.install(|| search(&brief, &mine, &whole, progress));
        let every = options.top.is_none();
        report.commands = given.map(|m| commands::check_command(m, args, &mine, &report, every));
        // Every shape's full dimensions, not just its name, and the models searched.
        let print_key = format!("{shapes:?} {:?} {:?}", options.memory, options.time);
        let partial = Partial::from_report(
            report,
            shard,
            &mine,
            &indices,
            shapes.len(),
            fingerprint(&print_key),
            options.top,
            &options.time,
            options.distinct_front,
        );
        let json = serde_json::to_string_pretty(&partial)
            .map_err(|e| Error::invalid("output", "partial", e.to_string()))?;
        print(out, &(json + "\n"))?;
        // A shard that ran has done its job, whether or not its shapes pass.
        return Ok(true);
    }
    if options.top.is_none() && options.distinct == Distinct::Plan {
        // Every passing plan, made one at a time as it is written, never all held.
        let (mut report, all) = pool.install(|| search_all(&brief, &shapes, &options, progress));
        report.commands = given.map(|m| commands::check_command(m, args, &shapes, &report, true));
        if let (Some(why), false) = (report.unlisted(), quiet) {
            eprintln!("note: {why}");
        }
        let shown = Written::new(
            &all,
            quiet || args.output.pareto.as_deref() == Some(Path::new("-")),
        );
        return write_report(&args.output, &report, &shown, quiet, out);
    }
    let (mut report, why) = pool.install(|| search_listing(&brief, &shapes, &options, progress));
    report.commands = given.map(|m| commands::check_command(m, args, &shapes, &report, false));
    if let (Some(why), false) = (why, quiet) {
        eprintln!("note: {why}");
    }
    if args.sensitivity {
        // Under the options the report was made with (exact, where the search went exact).
        let options = SearchOptions {
            exact: report.exact,
            ..options
        };
        let found = pool.install(|| sensitivity(&brief, &shapes, &options, &report))?;
        report.sensitivity = Some(found);
    }
    write_report(&args.output, &report, &report.plans.as_slice(), quiet, out)
}

/// A loss target no plan misses: far above the law's loss at a handful of tokens (about 2,087
/// for Llama 3 8B on one token under Besiroglu et al.'s law).
const ANY_LOSS: f64 = 1e9;

/// `brief` with the best loss its GPUs, days and memory reach as its target (`--best-loss`):
/// the lowest loss of a search to [`ANY_LOSS`] over every whole token count of the windows,
/// rounded up to five decimals, so the best plan and those within the rounding pass. The
/// brief as it is where no plan passes even then (the report says why).
fn best_loss(
    brief: Brief,
    shapes: &[Shape],
    options: &SearchOptions,
    pool: &rayon::ThreadPool,
    quiet: bool,
) -> Result<Brief> {
    let loose = Brief {
        loss_target: ANY_LOSS,
        ..brief.clone()
    };
    let first = SearchOptions {
        rank: crate::search::rank::Rank::Loss,
        top: Some(1),
        exact: true,
        distinct: Distinct::Shape,
        ..options.clone()
    };
    let found = pool.install(|| search(&loose, shapes, &first, &progress::Silent));
    let Some(best) = found.plans.first() else {
        if !quiet {
            eprintln!(
                "note: --best-loss: no plan fits the memory and the days at any loss; searched to the brief's target, {}, to say why",
                brief.loss_target
            );
        }
        return Ok(brief);
    };
    let target = (best.loss * 1e5).ceil() / 1e5;
    if !quiet {
        eprintln!(
            "note: --best-loss: the lowest loss in reach is {} ({} on {} tokens); searching to loss ≤ {target}",
            crate::format::fixed(best.loss, 6),
            best.model,
            crate::format::count(best.tokens as f64)
        );
    }
    Ok(Brief {
        loss_target: target,
        ..brief
    })
}

fn run_merge(args: &MergeArgs, quiet: bool, out: &mut dyn Write) -> Result<bool> {
    let inputs: Vec<&Path> = args.files.iter().map(PathBuf::as_path).collect();
    check_output(&args.output, &inputs)?;
    let partials = args
        .files
        .iter()
        .map(|path| input::partial(path, args.max_file_mb.saturating_mul(input::MIB)))
        .collect::<Result<Vec<Partial>>>()?;
    for p in &partials {
        p.brief.validate()?;
    }
    let report = merge(partials)?;
    write_report(&args.output, &report, &report.plans.as_slice(), quiet, out)
}

/// Refuses output options that clash: the front and the JSON both on stdout, or the front
/// overwriting the brief it was computed from.
fn check_output(out: &OutputArgs, inputs: &[&Path]) -> Result<()> {
    if out.pareto.as_deref() == Some(Path::new("-")) && out.format() != Format::Text {
        return Err(Error::invalid(
            "--pareto",
            "-",
            "a file when --json or --format also writes to stdout",
        ));
    }
    for (flag, path) in [("--pareto", &out.pareto), ("--plot", &out.plot)] {
        if let Some(path) = path {
            refuse_overwrite(flag, path, inputs)?;
        }
    }
    if let (Some(front), Some(plot)) = (&out.pareto, &out.plot) {
        if front == plot || same_file(front, plot) {
            return Err(Error::invalid(
                "--plot",
                plot.display(),
                "a path other than the --pareto file",
            ));
        }
    }
    Ok(())
}

/// Refuses an output `path` (of `flag`) that is one of the input files it was computed from
/// (a brief, a model's config, an efficiency table, a partial result).
fn refuse_overwrite(flag: &str, path: &Path, inputs: &[&Path]) -> Result<()> {
    if inputs.iter().any(|input| same_file(path, input)) {
        return Err(Error::invalid(
            flag,
            path.display(),
            "a path other than the input files it would overwrite",
        ));
    }
    Ok(())
}

/// The error of a tornado chart asked of a search where no plan passes.
fn no_first_plan() -> Error {
    Error::invalid(
        "--plot",
        "with --sensitivity",
        "a search where some plan passes, whose first plan the tornado chart shows",
    )
}

/// Writes a search's report and its Pareto front as asked, the report's `plans` walked as they
/// are written; true when some plan passes. The files are written first, each whole; the report
/// then streams to stdout (or to stderr when the front goes to stdout).
fn write_report(
    out: &OutputArgs,
    report: &SearchReport,
    plans: &dyn Ranked,
    quiet: bool,
    main: &mut dyn Write,
) -> Result<bool> {
    let exporter = out.format().exporter();
    if let Some(path) = &out.plot {
        let svg = match (&report.sensitivity, report.plans.first()) {
            (None, _) => plot::loss_days(report)?,
            (Some(s), Some(first)) => match &s.plan {
                Some(table) => plot::tornado(table, &report.brief, first)?,
                None => return Err(no_first_plan()),
            },
            (Some(_), None) => return Err(no_first_plan()),
        };
        write_atomic(path, svg.as_bytes())?;
    }
    let pass = report.any_pass();
    if let Some(path) = &out.pareto {
        let front = out.pareto_format.format().exporter().front(report)?;
        if path.as_path() == Path::new("-") {
            // The front alone on stdout, so it can be piped; the summary to stderr.
            if !quiet {
                let mut stderr = io::BufWriter::new(io::stderr().lock());
                // A summary that cannot reach the terminal does not stop the front.
                match exporter.write_search(report, plans, &mut stderr) {
                    Err(Error::Io { .. }) | Ok(()) => {}
                    Err(e) => return Err(e),
                }
                let _ = stderr.flush();
            }
            print(main, &front)?;
            return Ok(pass);
        }
        write_atomic(path, front.as_bytes())?;
    }
    let mut main = io::BufWriter::new(main);
    let summary = exporter.write_search(report, plans, &mut main);
    quietly_closed(summary.and_then(|()| written(main.flush())))?;
    Ok(pass)
}
