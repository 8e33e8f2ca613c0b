//! `trainplan`: parse the command line, call the library, print. Exit status 0 when the
//! answer is yes (the design passes, some plan passes), 1 when it is no, 2 for bad input.

mod cli;

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use cli::{
    BriefCommandArgs, BriefFormat, CheckArgs, Cli, Command, FrontFormat, MergeArgs, OutputArgs,
    SearchArgs,
};
use trainplan::check::check;
use trainplan::error::read_json;
use trainplan::error::{Error, Result};
use trainplan::export::{brief_lines, Format};
use trainplan::layout::Layout;
use trainplan::output::{emit, same_file, write_atomic};
use trainplan::plan::Design;
use trainplan::progress::Progress;
use trainplan::search::{search, SearchReport};
use trainplan::shard::{fingerprint, merge, Partial, Shard};

/// Sweeps of at least this many shapes get a progress bar (on a terminal): about a second.
const LONG_SWEEP: u64 = 10_000;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprintln!("error: a command is needed: check or search (trainplan --help lists them)");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("{}", one_line(&e.render().to_string()));
            return ExitCode::from(2);
        }
    };
    let outcome = match &cli.command {
        Command::Check(args) => run_check(args),
        Command::Search(args) => run_search(args),
        Command::Merge(args) => run_merge(args),
        Command::Brief(args) => run_brief(args),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
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

/// Writes to stdout; a closed pipe ends the output quietly.
fn print(text: &str) -> Result<()> {
    emit(&mut io::stdout().lock(), text)
        .map(|_| ())
        .map_err(|source| Error::Io {
            action: "write",
            path: "<stdout>".into(),
            source,
        })
}

fn run_brief(args: &BriefCommandArgs) -> Result<bool> {
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
    print(&text)?;
    Ok(true)
}

fn run_check(args: &CheckArgs) -> Result<bool> {
    let brief = args.brief.resolve()?;
    let shape = args.shape()?;
    let layout = Layout::new(&brief, &shape, args.tp, args.pp, args.zero)?;
    if args.tokens == 0 {
        return Err(Error::invalid("--tokens", 0, "a whole number ≥ 1"));
    }
    let time = args.time.model()?;
    let design = Design {
        shape: &shape,
        tokens: args.tokens,
        layout,
        memory: args.memory(&brief)?,
        time: &time,
    };
    let report = check(&brief, &design)?;
    let format = if args.json {
        Format::Json
    } else {
        Format::Text
    };
    print(&format.exporter().check(&report)?)?;
    Ok(report.plan.pass)
}

/// An indicatif bar, fed by the search: drawn on stderr when that is a terminal and the sweep
/// is long, hidden otherwise.
struct Bar(ProgressBar);

impl Bar {
    fn new() -> Self {
        let bar = ProgressBar::hidden();
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:40} {percent:>3}% {human_pos}/{human_len} shapes, {per_sec}, ETA {eta}",
            )
            .expect("the template is valid"),
        );
        Bar(bar)
    }
}

impl Progress for Bar {
    fn start(&self, total: u64) {
        self.0.set_length(total);
        if io::stderr().is_terminal() && total >= LONG_SWEEP {
            self.0.set_draw_target(ProgressDrawTarget::stderr());
        }
    }
    fn advance(&self, n: u64) {
        self.0.inc(n);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

fn run_search(args: &SearchArgs) -> Result<bool> {
    let brief = args.brief.resolve()?;
    let shapes = args.shapes(&brief)?;
    let options = args.options(&brief)?;
    let shard = args.shard.as_deref().map(Shard::parse).transpose()?;
    check_output(&args.output, args.brief.brief.as_deref())?;

    let bar = Bar::new();
    let progress: &dyn Progress = &bar;
    let threads = args.threads()?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::invalid("--threads", args.threads, e.to_string()))?;
    if let Some(shard) = shard {
        let indices: Vec<usize> = (0..shapes.len()).filter(|&i| shard.takes(i)).collect();
        let mine: Vec<_> = indices.iter().map(|&i| shapes[i].clone()).collect();
        let report = pool.install(|| search(&brief, &mine, &options, progress));
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
        );
        let json = serde_json::to_string_pretty(&partial)
            .map_err(|e| Error::invalid("output", "partial", e.to_string()))?;
        print(&(json + "\n"))?;
        // A shard that ran has done its job, whether or not its shapes pass.
        return Ok(true);
    }
    let report = pool.install(|| search(&brief, &shapes, &options, progress));
    write_report(&args.output, &report)
}

fn run_merge(args: &MergeArgs) -> Result<bool> {
    check_output(&args.output, None)?;
    let partials = args
        .files
        .iter()
        .map(|path| read_json::<Partial>(path, "a partial search result"))
        .collect::<Result<Vec<Partial>>>()?;
    for (p, path) in partials.iter().zip(&args.files) {
        if args
            .output
            .pareto
            .as_deref()
            .is_some_and(|out| same_file(out, path))
        {
            return Err(Error::invalid(
                "--pareto",
                path.display(),
                "a path other than the partial files it would overwrite",
            ));
        }
        p.brief.validate()?;
    }
    let report = merge(partials)?;
    write_report(&args.output, &report)
}

/// Refuses output options that clash: the front and the JSON both on stdout, or the front
/// overwriting the brief it was computed from.
fn check_output(out: &OutputArgs, input: Option<&Path>) -> Result<()> {
    if out.pareto.as_deref() == Some(Path::new("-")) && out.json {
        return Err(Error::invalid(
            "--pareto",
            "-",
            "a file when --json also writes to stdout",
        ));
    }
    if let (Some(front), Some(input)) = (&out.pareto, input) {
        if same_file(front, input) {
            return Err(Error::invalid(
                "--pareto",
                front.display(),
                "a path other than the --brief file it would overwrite",
            ));
        }
    }
    Ok(())
}

/// Writes a search's report (text or JSON) and its Pareto front as asked; true when some
/// plan passes.
fn write_report(out: &OutputArgs, report: &SearchReport) -> Result<bool> {
    let format = if out.json { Format::Json } else { Format::Text };
    let summary = format.exporter().search(report)?;
    if let Some(path) = &out.pareto {
        let front_format = match out.pareto_format {
            FrontFormat::Json => Format::Json,
            FrontFormat::Text => Format::Text,
        };
        let front = front_format.exporter().front(report)?;
        if path.as_path() == Path::new("-") {
            // The front alone on stdout, so it can be piped; the summary to stderr.
            let _ = io::stderr().lock().write_all(summary.as_bytes());
            print(&front)?;
            return Ok(report.passing > 0);
        }
        write_atomic(path, front.as_bytes())?;
    }
    print(&summary)?;
    Ok(report.passing > 0)
}
