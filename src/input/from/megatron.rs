//! Megatron-LM's `pretrain_gpt.py` arguments read back: the bash array `export --format
//! megatron` writes, a launch script, or a file of `--option value` tokens.
//!
//! The text is split as a shell splits words: `#` comments, `\` line continuations, single and
//! double quotes, `--option=value`. Words before a `*.py` word are the launcher's (torchrun's
//! `--nproc_per_node` and `--nnodes` give the GPUs); a shell array's `NAME=(` and `)` and
//! other words that are no option are passed over. Each option is one of: mapped to the design
//! (the model's dimensions, the layout, the step, the precision), a kernel or overlap option
//! that says the stack, an option that does not change the plan (data, tokenizer, optimizer
//! schedule, logging, checkpoints: listed as unused), or refused by name — one that changes
//! what is trained or how in a way the design cannot say, or one no table here knows.
//!
//! Two things Megatron-LM's arguments do not carry are read from the comments `export` writes
//! when present: the GPUs (`# Launch on N GPUs`) and the vocabulary (`vocabulary N)`); a file
//! without them needs `--gpus` (or torchrun's counts) and `--vocab-size` or `--model-config`.

use std::collections::HashSet;

use crate::cost::step::experts::Dispatcher;
use crate::cost::step::precision::Precision;
use crate::cost::step::recipe::{Bf16Layers, Fp8Recipe, MasterWeights, OptimizerStates};
use crate::cost::step::stack::StageSplit;
use crate::cost::step::stack::{GradientPrecision, LossPrecision};
use crate::cost::step::Schedule;
use crate::cost::step::{MoeRecompute, Recompute};
use crate::error::{Error, Result};
use crate::model::layout::ZeroStage;
use crate::model::{Biases, Mlp, Norm, Positions, Style};

use super::design::{times, whole, Dims, FileExperts, FileModel, FromFile, Source};
use super::megatron_options;
use super::shell::{self, Arg};

/// Options that say which kernels and overlaps run: the stack's (`cost::step::stack::Settings`).
/// (`--tp-comm-overlap` is the step's: [`crate::cost::step::Step::tp_comm_overlap`].)
pub const STACK_OPTIONS: [&str; 8] = [
    "--attention-backend",
    "--cross-entropy-loss-fusion",
    "--no-rope-fusion",
    "--no-bias-swiglu-fusion",
    "--overlap-grad-reduce",
    "--overlap-param-gather",
    "--no-overlap-p2p-communication",
    "--cp-comm-type",
];

/// The launchers' options (torchrun's, the deepspeed launcher's): their counts give the GPUs,
/// the rest say where the ranks meet.
const LAUNCHER_OPTIONS: [&str; 16] = [
    "--nproc_per_node",
    "--nproc-per-node",
    "--nnodes",
    "--num_gpus",
    "--num_nodes",
    "--node_rank",
    "--node-rank",
    "--master_addr",
    "--master-addr",
    "--master_port",
    "--master-port",
    "--rdzv_backend",
    "--rdzv-backend",
    "--rdzv_endpoint",
    "--rdzv-endpoint",
    "--rdzv_id",
];

/// Prefixes of options that do not change the plan: data, tokenizer, optimizer and its
/// schedule, logging, checkpoints, evaluation, seeds, initialisation, dropout, timeouts.
const UNUSED_PREFIXES: [&str; 59] = [
    "--attention-softmax-in-fp32",
    // LayerNorm's gamma held as 1 + γ: the same parameters and kernels.
    "--apply-layernorm-1p",
    // The embeddings' own learning rates (Megatron-LM's decoupled AdamW): the optimizer's
    // schedule, not its state.
    "--decoupled-",
    "--tiktoken-",
    "--no-create-attention-mask-in-dataloader",
    "--no-mmap-bin-files",
    "--cuda-graph-warmup-steps",
    "--calculate-per-token-loss",
    "--empty-unused-memory-level",
    "--profile",
    "--data-",
    "--split",
    "--mock-data",
    "--tokenizer-",
    "--vocab-file",
    "--merge-file",
    "--save",
    "--load",
    "--no-save",
    "--no-load",
    "--ckpt-",
    "--dist-ckpt",
    "--async-save",
    "--finetune",
    "--pretrained-checkpoint",
    "--log-",
    "--log",
    "--tensorboard",
    "--wandb-",
    "--timing-log",
    "--eval-",
    "--exit-",
    "--lr",
    "--min-lr",
    "--weight-decay",
    "--start-weight-decay",
    "--end-weight-decay",
    "--adam-",
    "--sgd-",
    "--optimizer",
    "--clip-grad",
    "--seed",
    "--init-method-",
    "--attention-dropout",
    "--hidden-dropout",
    "--distributed-backend",
    "--distributed-timeout-minutes",
    "--num-workers",
    "--use-mcore-models",
    "--use-flash-attn",
    "--manual-gc",
    "--fp8-amax-",
    "--fp8-margin",
    "--no-gradient-accumulation-fusion",
    "--mtp-loss-scaling-factor",
    // Megatron-DeepSpeed's: the engine's JSON (its batch and stage are the options'), its
    // checkpointing (the recompute options say what is recomputed), and FP16's scaling off.
    "--deepspeed_config",
    "--deepspeed-config",
    "--deepspeed-activation-checkpointing",
    "--no-query-key-layer-scaling",
];

/// Options the exporter writes whose value is a fact of every design here (Llama-style
/// blocks on Transformer Engine): the value must be this one.
const FIXED: [(&str, &str); 2] = [
    ("--transformer-impl", "transformer_engine"),
    ("--moe-router-load-balancing-type", "aux_loss"),
];

/// Options that take no value.
const SWITCHES: [&str; 43] = [
    "--deepspeed",
    "--use-rotary-position-embeddings",
    "--deepspeed-activation-checkpointing",
    "--multi-latent-attention",
    "--is-hybrid-model",
    "--squared-relu",
    "--moe-router-enable-expert-bias",
    "--cpu-offloading",
    "--cpu-offloading-activations",
    "--first-last-layers-bf16",
    "--grad-reduce-in-bf16",
    "--accumulate-allreduce-grads-in-fp32",
    "--use-precision-aware-optimizer",
    "--no-store-param-remainders",
    "--moe-grouped-gemm",
    "--moe-enable-deepep",
    "--overlap-moe-expert-parallel-comm",
    "--qk-layernorm",
    "--attention-softmax-in-fp32",
    "--calculate-per-token-loss",
    "--fp8-param-gather",
    "--sequence-parallel",
    "--use-distributed-optimizer",
    "--use-megatron-fsdp",
    "--group-query-attention",
    "--swiglu",
    "--use-rope-scaling",
    "--untie-embeddings-and-output-weights",
    "--disable-bias-linear",
    "--add-qkv-bias",
    "--bf16",
    "--fp16",
    "--recompute-activations",
    "--cross-entropy-loss-fusion",
    "--no-rope-fusion",
    "--no-bias-swiglu-fusion",
    "--overlap-grad-reduce",
    "--overlap-param-gather",
    "--tp-comm-overlap",
    "--no-overlap-p2p-communication",
    "--no-gradient-accumulation-fusion",
    "--use-mcore-models",
    "--mock-data",
];

/// The number after `prefix` in a comment, if any.
fn number_after(comments: &[String], prefix: &str) -> Option<u64> {
    comments.iter().find_map(|c| {
        let at = c.find(prefix)? + prefix.len();
        let digits: String = c[at..]
            .chars()
            .take_while(|ch| ch.is_ascii_digit() || *ch == ',')
            .filter(|ch| ch.is_ascii_digit())
            .collect();
        digits.parse().ok()
    })
}

/// The (stage, chunk) entries of a `--pipeline-model-parallel-layout` string (`Et|(t|)*3,tL`).
pub fn layout_entries(text: &str) -> Result<u64> {
    let bad = || {
        Error::invalid(
            "--pipeline-model-parallel-layout",
            text,
            "Megatron-LM's layout: entries of E, t, t*n, m and L joined by |, runs as (entry|)*n,",
        )
    };
    let mut count: u64 = 0;
    let mut rest = text.trim().trim_matches('"');
    while !rest.is_empty() {
        if let Some(run) = rest.strip_prefix('(') {
            let close = run.find(")*").ok_or_else(bad)?;
            let after = &run[close + 2..];
            let end = after.find(',').unwrap_or(after.len());
            let n: u64 = after[..end].parse().map_err(|_| bad())?;
            count = count.checked_add(n).ok_or_else(bad)?;
            rest = after.get(end + 1..).unwrap_or("");
        } else {
            let end = rest.find('|').unwrap_or(rest.len());
            let entry = &rest[..end];
            if !entry
                .chars()
                .all(|c| matches!(c, 'E' | 't' | 'm' | 'L' | '*') || c.is_ascii_digit())
            {
                return Err(bad());
            }
            count += 1;
            rest = rest.get(end + 1..).unwrap_or("");
        }
    }
    if count == 0 {
        return Err(bad());
    }
    Ok(count)
}

/// A float for `option`.
fn float(option: &str, text: &str) -> Result<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| Error::invalid(option, text, "a number > 0"))
}

/// The CUDA graphs of `--cuda-graph-impl` and `--cuda-graph-scope` (`arguments.py`): none
/// under `none` (its default, whatever scope is given); a whole iteration under `local` with
/// `full_iteration`; Transformer Engine's partial scopes under `transformer_engine`. Capturing
/// each layer whole (`local` or `transformer_engine` with no scope) and the `moe` scope (which
/// needs token-dropping experts) are graphs trainplan does not plan, and are refused by name
/// for every model ([`crate::cost::step::graphs`]).
fn cuda_graphs(
    implementation: Option<&str>,
    scope: Option<&str>,
) -> Result<Option<crate::cost::step::graphs::CudaGraphs>> {
    use crate::cost::step::graphs::CudaGraphs;
    let words = scope.unwrap_or("").trim();
    match implementation {
        None if scope.is_none() => Ok(None),
        None | Some("none") => Ok(Some(CudaGraphs::NONE)),
        Some("local") if words == "full_iteration" => Ok(Some(CudaGraphs::FULL)),
        Some("transformer_engine") if !words.is_empty() && words != "full_iteration" => {
            CudaGraphs::parse_as("--cuda-graph-scope", words).map(Some)
        }
        Some(i @ ("local" | "transformer_engine")) => Err(Error::invalid(
            "--cuda-graph-scope",
            if words.is_empty() { "none given" } else { words },
            format!(
                "full_iteration with --cuda-graph-impl local, or partial scopes (attn, mlp, moe_router, moe_preprocess, mamba) with transformer_engine: the graphs trainplan plans (--cuda-graph-impl {i} given)"
            ),
        )),
        Some(other) => Err(Error::invalid(
            "--cuda-graph-impl",
            other,
            "none, local or transformer_engine",
        )),
    }
}

/// Megatron-LM's options that take a list of values (`nargs='*'`): every word up to the next
/// option.
const LISTS: [&str; 5] = [
    "--rampup-batch-size",
    "--recompute-modules",
    "--spec",
    "--cuda-graph-scope",
    "--cuda-graph-modules",
];

/// Whether `word`, the word after a switch in the same command or array, is a value the switch
/// cannot take (`--sequence-parallel false`), rather than the script's next argument: a
/// `*.py`, a redirection or another option is none.
fn stray_value(word: &str) -> bool {
    !word.starts_with('-') && !word.ends_with(".py") && !word.contains(['>', '<'])
}

/// An option of the script: its value (or values, for [`LISTS`]), the line it is written on,
/// whether its value is the script's own, and whether it is the launcher's (before the
/// `*.py` its command runs, or a word of `srun`, `sbatch` and their like).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Opt {
    pub(super) name: String,
    pub(super) value: Option<String>,
    pub(super) line: usize,
    pub(super) known: bool,
    pub(super) launcher: bool,
}

impl Opt {
    /// `--name value`, as the report lists it.
    fn text(&self) -> String {
        match &self.value {
            Some(v) => format!("{} {v}", self.name),
            None => self.name.clone(),
        }
    }
}

/// Commands whose options are all the job's placement (Slurm's, MPI's), never the program's.
const PLACERS: [&str; 5] = ["srun", "sbatch", "salloc", "mpirun", "mpiexec"];

/// The options of the script's arguments, each with its value (or values, for [`LISTS`]);
/// a word that cannot be one option (several words quoted as one, a reference kept as
/// written) is a problem, said with its line.
pub(super) fn options(args: &[Arg], problems: &mut Vec<(usize, Error)>) -> Vec<Opt> {
    let mut options: Vec<Opt> = Vec::new();
    // Where each command's program starts: its `*.py` word.
    let mut program: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    let mut placer: HashSet<usize> = HashSet::new();
    for (k, a) in args.iter().enumerate() {
        if a.text.ends_with(".py") {
            program.entry(a.group).or_insert(k);
        }
        let first = k == 0 || args[k - 1].group != a.group;
        if first && PLACERS.contains(&a.text.rsplit('/').next().unwrap_or("")) {
            placer.insert(a.group);
        }
    }
    // Where the script runs a training program (`pretrain_gpt.py`), the other programs it
    // runs (a data tool, a converter) hand it no options.
    let trains = |k: &usize| {
        let name = args[*k].text.rsplit('/').next().unwrap_or("");
        name.contains("train") || name.contains("finetune")
    };
    let elsewhere: HashSet<usize> = if program.values().any(trains) {
        program
            .iter()
            .filter(|(_, k)| !trains(k))
            .map(|(g, _)| *g)
            .collect()
    } else {
        HashSet::new()
    };
    let mut i = 0;
    while i < args.len() {
        let w = &args[i];
        let k = i;
        i += 1;
        if !w.text.starts_with("--") || elsewhere.contains(&w.group) {
            continue;
        }
        // Before the program a command runs, the launcher's (torchrun's, srun's, a
        // profiler's); in a command that runs none, srun's or sbatch's all.
        // A command that runs no program (a file of arguments, an array read where written)
        // holds the launcher's counts as the launcher's.
        let launcher = match program.get(&w.group) {
            Some(&p) => k < p,
            None => {
                let name = w.text.split_once('=').map_or(w.text.as_str(), |(n, _)| n);
                placer.contains(&w.group)
                    || LAUNCHER_OPTIONS.contains(&name)
                    || COUNTS.iter().any(|names| names.contains(&name))
            }
        };
        let name = w.text.split_once('=').map_or(w.text.as_str(), |(n, _)| n);
        if launcher && (!w.known || name.contains(char::is_whitespace)) {
            // The launcher's own (a log file named by a command's output): not the plan's.
            continue;
        }
        if !w.known || name.contains(char::is_whitespace) {
            // Several options quoted as one word, or a name the reader does not know:
            // bash would hand it over otherwise.
            problems.push((
                w.line,
                Error::invalid(
                    "megatron arguments",
                    w.text.escape_debug(),
                    "options written out, one a word (bash hands a quoted \"--a b\" over as one word, which Megatron-LM's parser refuses)",
                ),
            ));
            continue;
        }
        let opt = |name: &str, value: Option<String>, known: bool| Opt {
            name: name.to_string(),
            value,
            line: w.line,
            known,
            launcher,
        };
        if let Some((n, v)) = w.text.split_once('=') {
            options.push(opt(n, Some(v.to_string()), w.known));
            continue;
        }
        let name = w.text.as_str();
        // The next word of the same command or array.
        let next = args.get(i).filter(|n| n.group == w.group);
        if SWITCHES.contains(&name) && !launcher {
            if let Some(next) = next.filter(|n| n.known && stray_value(&n.text)) {
                problems.push((
                    next.line,
                    Error::invalid(
                        name,
                        next.text.escape_debug(),
                        format!(
                            "no value: {name} is a switch, on when given and off when left out"
                        ),
                    ),
                ));
                i += 1;
                continue;
            }
            options.push(opt(name, None, true));
            continue;
        }
        let value_like = |n: &&Arg| !n.text.starts_with("--") && !n.text.ends_with(".py");
        if LISTS.contains(&name) && !launcher {
            let mut values = Vec::new();
            let mut known = true;
            while let Some(next) = args
                .get(i)
                .filter(|n| n.group == w.group)
                .filter(value_like)
            {
                values.push(next.text.clone());
                known &= next.known;
                i += 1;
            }
            options.push(opt(
                name,
                (!values.is_empty()).then(|| values.join(" ")),
                known,
            ));
            continue;
        }
        let value = next.filter(value_like);
        if value.is_some() {
            i += 1;
        }
        options.push(opt(
            name,
            value.map(|n| n.text.clone()),
            value.is_none_or(|n| n.known),
        ));
    }
    options
}

/// The GPUs the launcher's counts give (torchrun's, the deepspeed launcher's, Slurm's): the
/// GPUs a node when a number (torchrun's `gpu` or `auto` leave them to --gpus), times the
/// nodes, which must be a number when given (1 when not, torchrun's default): an elastic
/// range, an unset variable or a command is not one node. `--gpus` stands for counts not read.
pub(super) fn launcher_gpus(
    options: &[Opt],
    gpus: Option<u64>,
    problems: &mut Vec<(usize, Error)>,
) -> Option<u64> {
    let counted = |names: &[&str]| -> Option<(&Opt, Option<u64>)> {
        // The launcher's own: the same names after the program are the program's (refused).
        let found: Vec<&Opt> = names
            .iter()
            .filter_map(|n| options.iter().find(|o| o.launcher && o.name == *n))
            .collect();
        let parsed = found.iter().find_map(|o| {
            let v = o.value.as_deref()?.trim().parse::<u64>().ok()?;
            (o.known && v >= 1).then_some((*o, Some(v)))
        });
        parsed.or_else(|| found.first().map(|o| (*o, None)))
    };
    let per_node = counted(COUNTS[0]).and_then(|(_, v)| v);
    let nodes = match counted(COUNTS[1]) {
        None => Some(1),
        Some((_, Some(n))) => Some(n),
        Some((o, None)) => {
            if gpus.is_none() {
                problems.push((
                    o.line,
                    Error::invalid(
                        o.name.as_str(),
                        o.value.as_deref().map_or("no value".into(), |v| v.escape_debug().to_string()),
                        "a whole number of nodes ≥ 1, which the GPUs are counted from (an elastic range, an unset variable or a command is not read: give --gpus, or --set the variable)",
                    ),
                ));
            }
            None
        }
    };
    match times("--nnodes", per_node?, nodes?) {
        Ok(g) => Some(g),
        Err(e) => {
            problems.push((0, e));
            None
        }
    }
}

/// What the shell reader could not follow, each with its line, as problems of `--from`.
pub(super) fn script_problems(script: &shell::Script) -> Vec<(usize, Error)> {
    let mut problems: Vec<(usize, Error)> = Vec::new();
    for p in &script.problems {
        // The reader's problems start with their line.
        let (line, text) = p
            .strip_prefix("line ")
            .and_then(|r| r.split_once(": "))
            .and_then(|(n, t)| Some((n.parse::<usize>().ok()?, t)))
            .unwrap_or((0, p.as_str()));
        let (what, expected) = text
            .split_once(": ")
            .unwrap_or((text, "a script the reader can follow"));
        problems.push((line, Error::invalid("--from script", what, expected)));
    }
    problems
}

/// The design the arguments in `text` state.
pub fn parse(text: &str) -> Result<FromFile> {
    let file = parse_with(text, &shell::Given::default(), None)?;
    if file.refused.is_empty() {
        Ok(file)
    } else {
        Err(Error::Problems(file.refused))
    }
}

/// A whole number ≥ 0 for `field` (a ZeRO stage), as a `u8`.
fn n_or_zero(field: &str, text: &str) -> Result<u8> {
    text.trim()
        .parse::<u8>()
        .map_err(|_| Error::invalid(field, text, "a whole number, 0 to 3"))
}

/// The vocabulary a tokenizer type fixes (Megatron-LM's `--tokenizer-type`), with the
/// tokenizer's name: GPT-2's BPE (50,257, Radford et al. 2019) and Llama 2's SentencePiece
/// model (32,000, Touvron et al. 2023). Others read theirs from a file.
fn tokenizer_vocab(kind: &str) -> Option<(u64, &'static str)> {
    match kind {
        "GPT2BPETokenizer" => Some((50_257, "GPT-2's BPE")),
        "Llama2Tokenizer" => Some((32_000, "Llama 2's tokenizer")),
        _ => None,
    }
}

/// The options of a reading that change the plan, as `--name value` (the launcher's GPU
/// counts among them): what two readings of a script must agree on.
fn planned(options: &[Opt]) -> Vec<String> {
    let mut out: Vec<String> = options
        .iter()
        .filter(|o| {
            !UNUSED_PREFIXES.iter().any(|p| o.name.starts_with(p))
                && (!o.launcher || COUNTS.iter().any(|names| names.contains(&o.name.as_str())))
        })
        .map(Opt::text)
        .collect();
    out.sort();
    out
}

/// The launcher's counts, each by its names in the order they are read: GPUs a node
/// (torchrun's, the deepspeed launcher's, then Slurm's tasks or GPUs a node), and nodes
/// (torchrun's, the deepspeed launcher's, then Slurm's).
const COUNTS: [&[&str]; 2] = [
    &[
        "--nproc_per_node",
        "--nproc-per-node",
        "--num_gpus",
        "--ntasks-per-node",
        "--gpus-per-node",
    ],
    &["--nnodes", "--num_nodes", "--nodes"],
];

/// Where the readings of a script (its undecided conditions) disagree on the plan's options:
/// one problem for each reading that differs from the first (whose options are `first`),
/// naming its choices.
fn disagreements(script: &shell::Script, first: &[Opt]) -> (Vec<(usize, Error)>, Vec<String>) {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let first = planned(first);
    let mut undecided: Vec<&shell::Choice> = Vec::new();
    for reading in &script.readings[1..] {
        let these = planned(&options(&reading.args, &mut Vec::new()));
        let choices: Vec<&shell::Choice> = reading
            .choices
            .iter()
            .filter(|c| !script.readings[0].choices.contains(c))
            .collect();
        if these == first {
            undecided.extend(choices);
            continue;
        }
        let only = |a: &[String], b: &[String]| -> String {
            let v: Vec<&str> = a
                .iter()
                .filter(|x| !b.contains(x))
                .map(String::as_str)
                .collect();
            if v.is_empty() {
                "nothing".into()
            } else {
                v.join(", ")
            }
        };
        let line = choices.first().map_or(0, |c| c.line);
        // The branch flags that give each reading: this one's, and the first's.
        let flags = |of: &[&shell::Choice]| -> String {
            of.iter()
                .map(|c| format!("--branch {}={}", c.line, c.taken))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let firsts: Vec<&shell::Choice> = script.readings[0]
            .choices
            .iter()
            .filter(|c| choices.iter().any(|o| o.line == c.line))
            .collect();
        let conditions: Vec<String> = choices
            .iter()
            .map(|c| format!("`{}` (line {})", c.condition, c.line))
            .collect();
        problems.push((
            line,
            Error::invalid(
                "--from script",
                conditions.join(", "),
                format!(
                    "a condition the script's values decide, or a branch chosen: its branches give different options ({} gives {}, {} gives {}; or --set the variable it tests)",
                    flags(&firsts),
                    only(&first, &these),
                    flags(&choices),
                    only(&these, &first),
                ),
            ),
        ));
    }
    undecided.sort_by_key(|c| c.line);
    undecided.dedup_by_key(|c| c.line);
    for c in undecided {
        notes.push(format!(
            "line {}: `{}` is not decided by the script's values; its branches differ only in options that do not change the plan",
            c.line, c.condition
        ));
    }
    (problems, notes)
}

/// The problems as one report: each refused option with its line, then what was mapped and
/// what was read and not used.
pub fn report(problems: &[(usize, Error)]) -> Vec<String> {
    let mut sorted: Vec<&(usize, Error)> = problems.iter().collect();
    sorted.sort_by_key(|(line, _)| *line);
    sorted
        .into_iter()
        .map(|(line, e)| {
            if *line == 0 {
                e.to_string()
            } else {
                format!("line {line}: {e}")
            }
        })
        .collect()
}

/// [`parse`], with the user's word on what the script leaves open ([`shell::Given`]) and the
/// GPUs when given (`--gpus`), which stand for launcher counts the reader cannot read.
///
/// Every problem is collected: an option refused, a value the reader does not know, a
/// condition whose readings disagree. When the design is whole without the refused options,
/// it is returned with them in [`FromFile::refused`] (the caller refuses it, or grades it
/// under `--lenient`); when it is not, the error lists them all.
pub fn parse_with(text: &str, given: &shell::Given, gpus: Option<u64>) -> Result<FromFile> {
    let script = shell::read_with(text, given)?;
    let args = script.args();
    let comments = &script.comments;
    let mut problems = script_problems(&script);
    let options = options(args, &mut problems);
    if options.is_empty() {
        return Err(Error::invalid(
            "--from",
            "no Megatron-LM options",
            "a Megatron-LM argument list (--num-layers …), a torchtitan job TOML or a DeepSpeed JSON",
        ));
    }
    let mut from = FromFile::new(Source::Megatron);
    from.notes = script.notes.clone();
    if script.readings.len() > 1 {
        let (differ, notes) = disagreements(&script, &options);
        problems.extend(differ);
        from.notes.extend(notes);
    }
    from.gpus = launcher_gpus(&options, gpus, &mut problems);
    let mut seen: HashSet<&str> = HashSet::with_capacity(options.len());
    let mut experts = ExpertsBuilder::default();
    let mut dims = DimsBuilder::default();
    let mut recompute = RecomputeBuilder::default();
    let mut fp8: (Option<String>, Option<String>) = (None, None);
    let mut optimizer = OptimizerBuilder::default();
    // --first-last-layers-bf16 and its counts (Megatron-LM's defaults: 1 and 1).
    let mut bf16_layers: (bool, Option<u32>, Option<u32>) = (false, None, None);
    let mut fp4: (Option<String>, Option<String>) = (None, None);
    // --cross-entropy-fusion-impl: whether it names Transformer Engine's.
    let mut loss_impl: Option<bool> = None;
    let (mut fsdp, mut distributed, mut strategy) = (false, false, None::<String>);
    let mut muon: Option<bool> = None;
    // --cuda-graph-impl and --cuda-graph-scope, as written.
    let mut graphs: (Option<String>, Option<String>) = (None, None);
    let mut stated_adam = false;
    // Megatron-DeepSpeed's engine, and its ZeRO stage.
    let (mut deepspeed, mut ds_zero) = (false, None::<ZeroStage>);
    let mut bf16 = false;
    let (mut iters, mut samples, mut virtual_layers) = (None, None, None);
    // --step-batch-size-schedule and its line; --fp16.
    let mut step_schedule: Option<(String, usize)> = None;
    let mut fp16 = false;
    let mut divisor = None;
    for opt in &options {
        let (name, value, line) = (&opt.name, &opt.value, opt.line);
        if opt.launcher {
            // The launcher's own: its counts are read above; where the ranks meet, its
            // container, its logs are not the plan's.
            if !COUNTS.iter().any(|names| names.contains(&name.as_str())) {
                from.launcher.push(opt.text());
            }
            continue;
        }
        if !seen.insert(name.as_str()) {
            problems.push((
                line,
                Error::invalid(name.as_str(), "given twice", "each option once"),
            ));
            continue;
        }
        let need = || {
            let v = value
                .as_deref()
                .ok_or_else(|| Error::invalid(name.as_str(), "no value", "a value"))?;
            if !opt.known {
                return Err(Error::invalid(
                    name.as_str(),
                    v.escape_debug(),
                    "a value the script sets: the reader runs no command ($(…), backquotes) and cannot work out this one (give the variable with --set NAME=VALUE, or write the value out)",
                ));
            }
            Ok::<&str, Error>(v)
        };
        // An option the arms below do not list as unused is mapped.
        let unused_before = from.unused.len();
        let n = || whole(name, need()?);
        #[allow(clippy::redundant_closure_call)]
        let outcome = (|| -> Result<()> {
            match name.as_str() {
            "--tensor-model-parallel-size" => from.tp = Some(n()?),
            "--pipeline-model-parallel-size" => from.pp = Some(n()?),
            "--context-parallel-size" => from.cp = Some(n()?),
            "--num-distributed-optimizer-instances" => from.replicate = Some(n()?),
            "--num-virtual-stages-per-pipeline-rank" => {
                let v = n()?;
                from.schedule = Some(match u32::try_from(v) {
                    Ok(1) => Schedule::OneFOneB,
                    Ok(v) => Schedule::Interleaved(v),
                    Err(_) => return Err(Error::invalid(name.as_str(), v, "at most 2^32 − 1")),
                });
            }
            "--num-layers-per-virtual-pipeline-stage" => virtual_layers = Some(n()?),
            "--pipeline-model-parallel-layout" => {
                let text = need()?.to_string();
                from.pipeline_layout = Some((layout_entries(&text)?, text));
            }
            "--sequence-parallel" => from.sequence_parallel = Some(true),
            "--num-experts" => experts.routed = Some(n()?),
            "--moe-router-topk" => experts.per_token = Some(n()?),
            "--moe-router-num-groups" => experts.groups = Some(n()?),
            "--moe-router-group-topk" => experts.group_topk = Some(n()?),
            "--moe-ffn-hidden-size" => experts.ffn = Some(n()?),
            "--moe-shared-expert-intermediate-size" => experts.shared_ffn = Some(n()?),
            "--moe-layer-freq" => experts.layers = Some(need()?.to_string()),
            "--moe-router-enable-expert-bias" => experts.score_bias = true,
            "--moe-router-score-function" => {
                experts.score_function = Some(need()?.to_string())
            }
            "--moe-grouped-gemm" => experts.grouped_gemm = true,
            "--moe-token-dispatcher-type" => experts.dispatcher = Some(need()?.to_string()),
            "--moe-enable-deepep" => experts.deepep = true,
            "--overlap-moe-expert-parallel-comm" => experts.overlap = true,
            "--expert-model-parallel-size" => from.ep = Some(n()?),
            "--expert-tensor-parallel-size" => from.etp = Some(n()?),
            "--qk-layernorm" => dims.qk_norm = true,
            "--multi-latent-attention" => dims.latent = true,
            "--q-lora-rank" => dims.q_lora_rank = Some(n()?),
            "--kv-lora-rank" => dims.kv_lora_rank = Some(n()?),
            "--qk-head-dim" => dims.qk_head_dim = Some(n()?),
            "--qk-pos-emb-head-dim" => dims.qk_pos_emb_head_dim = Some(n()?),
            "--v-head-dim" => dims.v_head_dim = Some(n()?),
            "--mtp-num-layers" => dims.mtp = Some(n()?),
            "--recompute-modules" => recompute.modules = Some(need()?.to_string()),
            "--tp-comm-overlap" => from.tp_comm_overlap = Some(true),
            "--use-distributed-optimizer" => distributed = true,
            "--use-megatron-fsdp" => fsdp = true,
            // Megatron-DeepSpeed's spellings (microsoft/Megatron-DeepSpeed `arguments.py`):
            // the DeepSpeed engine and its ZeRO stage, grouped-query attention's KV heads,
            // RoPE. Its JSON (`--deepspeed_config`) is the batch and stage the options state.
            "--deepspeed" => deepspeed = true,
            "--zero-stage" => {
                let v = n_or_zero(name, need()?)?;
                ds_zero = Some(ZeroStage::new(v).map_err(|_| {
                    Error::invalid(name.as_str(), v, "0, 1, 2 or 3, DeepSpeed's ZeRO stages")
                })?);
            }
            "--num-key-value-heads" => {
                dims.kv_heads = Some(n()?);
                dims.gqa = true;
            }
            // Megatron-LM turns RoPE on whatever --position-embedding-type says.
            "--use-rotary-position-embeddings" => {
                dims.no_position = false;
                dims.position_given = true;
                dims.rotary_forced = true;
            }
            "--data-parallel-sharding-strategy" => strategy = Some(need()?.to_string()),
            "--num-layers" => dims.layers = Some(n()?),
            "--hidden-size" => dims.hidden = Some(n()?),
            "--ffn-hidden-size" => dims.ffn = Some(n()?),
            "--num-attention-heads" => dims.heads = Some(n()?),
            "--num-query-groups" => dims.kv_heads = Some(n()?),
            "--group-query-attention" => dims.gqa = true,
            "--kv-channels" => dims.head_dim = Some(n()?),
            "--vocab-size" => dims.vocab = Some(n()?),
            "--swiglu" => dims.swiglu = true,
            "--squared-relu" => dims.squared_relu = true,
            // Megatron-DeepSpeed spells RMSNorm `rmsnorm`.
            "--normalization" => {
                let v = need()?;
                dims.norm = Some(if v.eq_ignore_ascii_case("RMSNorm") {
                    Norm::RmsNorm
                } else if v.eq_ignore_ascii_case("LayerNorm") {
                    Norm::LayerNorm
                } else {
                    return Err(Error::invalid(
                        name.as_str(),
                        v,
                        "RMSNorm or LayerNorm, the norms trainplan counts",
                    ));
                });
            }
            // RoPE, or none: a hybrid's attention blocks take no position embedding.
            "--position-embedding-type" => match need()? {
                "rope" => {
                    dims.no_position = false;
                    dims.position_given = true;
                }
                "learned_absolute" => {
                    dims.no_position = false;
                    dims.position_given = dims.rotary_forced;
                }
                "none" => {
                    dims.no_position = true;
                    dims.position_given = true;
                }
                v => {
                    return Err(Error::invalid(
                        name.as_str(),
                        v,
                        "rope, or none for a hybrid Mamba-2 model (the blocks trainplan models)",
                    ))
                }
            },
            "--is-hybrid-model" => dims.hybrid = true,
            // The layer spec `pretrain_mamba.py` requires: Megatron-core's Mamba stack.
            "--spec" => match need()? {
                // Megatron-LM's newer module for the same stack (d98e8a6).
                crate::model::hybrid::MEGATRON_SPEC
                | "megatron.core.models.hybrid.hybrid_layer_specs hybrid_stack_spec" => {
                    dims.spec = true
                }
                v => {
                    return Err(Error::invalid(
                        name.as_str(),
                        v,
                        format!(
                            "{}, Megatron-core's Mamba stack (the blocks trainplan models)",
                            crate::model::hybrid::MEGATRON_SPEC
                        ),
                    ))
                }
            },
            // Megatron-LM's newer name for it (d98e8a6).
            "--hybrid-override-pattern" | "--hybrid-layer-pattern" => {
                dims.pattern = Some(need()?.to_string())
            }
            "--mamba-num-heads" => dims.mamba_heads = Some(n()?),
            "--mamba-head-dim" => dims.mamba_head_dim = Some(n()?),
            "--mamba-num-groups" => dims.mamba_groups = Some(n()?),
            "--mamba-state-dim" => dims.mamba_state = Some(n()?),
            "--norm-epsilon" => dims.norm_eps = Some(float(name, need()?)?),
            // RoPE over the whole head, as every model here has it.
            "--rotary-percent" => {
                if float(name, need()?)? != 1.0 {
                    return Err(Error::invalid(
                        name.as_str(),
                        need()?,
                        "1.0: RoPE over the whole head, the model trainplan plans",
                    ));
                }
            }
            "--rotary-base" => dims.rope_theta = Some(float(name, need()?)?),
            "--use-rope-scaling" => dims.rope_scaling = true,
            "--window-size" => {
                let v = need()?;
                // LEFT + 1 tokens a token sees, itself included: a LEFT of 2^64 − 1 has no
                // whole window (it used to wrap to 0).
                let window = v
                    .split_once(',')
                    .filter(|(_, right)| right.trim() == "0")
                    .and_then(|(left, _)| left.trim().parse::<u64>().ok())
                    .and_then(|left| left.checked_add(1))
                    .ok_or_else(|| {
                        Error::invalid(
                            name.as_str(),
                            v,
                            "a causal window as LEFT,0 (tokens before each one it sees), LEFT below 2^64 − 1",
                        )
                    })?;
                dims.sliding_window = Some(window);
            }
            "--window-attn-skip-freq" => dims.window_skip = Some(need()?.to_string()),
            "--make-vocab-size-divisible-by" => divisor = Some(n()?),
            "--untie-embeddings-and-output-weights" => dims.untied = true,
            "--disable-bias-linear" => dims.no_bias = true,
            "--add-qkv-bias" => dims.qkv_bias = true,
            "--seq-length" => from.seq_len = Some(n()?),
            "--max-position-embeddings" => dims.max_positions = Some(n()?),
            "--micro-batch-size" => from.micro_batch = Some(n()?),
            "--global-batch-size" => from.global_batch = Some(n()?),
            "--train-iters" => iters = Some(n()?),
            "--step-batch-size-schedule" => step_schedule = Some((need()?.to_string(), line)),
            "--fp16" => fp16 = true,
            // Deprecated and ignored at the pinned commit (`num_microbatches_calculator.py`:
            // "This argument is ignored. Use step_batch_size_schedule instead").
            "--rampup-batch-size" => {
                from.unused.push(opt.text());
                from.notes.push(format!(
                    "{}: Megatron-LM ignores it (deprecated for --step-batch-size-schedule), so the run keeps its global batch throughout, as planned",
                    opt.text()
                ));
            }
            "--train-samples" => samples = Some(n()?),
            "--recompute-granularity" => recompute.granularity = Some(need()?.to_string()),
            "--recompute-method" => recompute.method = Some(need()?.to_string()),
            "--recompute-num-layers" => recompute.layers = Some(n()?),
            "--recompute-activations" => recompute.granularity = Some("selective".into()),
            "--bf16" => bf16 = true,
            "--fp8-format" => fp8.0 = Some(need()?.to_string()),
            "--fp8-recipe" => fp8.1 = Some(need()?.to_string()),
            "--fp8-param-gather" => from.fp8_params = Some(true),
            // Which fused cross-entropy (Megatron-core's `cross_entropy_fusion_impl`): its
            // own, which keeps FP32 logits as the default loss does, or Transformer
            // Engine's, which writes their gradient over the BF16 ones.
            "--cross-entropy-fusion-impl" => match need()? {
                v @ ("native" | "te") => loss_impl = Some(v == "te"),
                v => {
                    return Err(Error::invalid(
                        name.as_str(),
                        v,
                        "native or te, the cross-entropies Megatron-core has",
                    ))
                }
            },
            // Megatron-LM before 310671436c (Oct 2025) turned offloading on with these
            // switches beside the count; the count alone says it now, and is what is read.
            "--cpu-offloading" | "--cpu-offloading-activations" => {}
            "--cpu-offloading-num-layers" => {
                let v = need()?;
                let n = v.trim().parse::<u16>().map_err(|_| {
                    Error::invalid(name.as_str(), v, "a whole number of layers, 0 to 65,535")
                })?;
                from.offload_activations = Some(n);
            }
            "--first-last-layers-bf16" => bf16_layers.0 = true,
            "--num-layers-at-start-in-bf16" => bf16_layers.1 = Some(count(name, need()?)?),
            "--num-layers-at-end-in-bf16" => bf16_layers.2 = Some(count(name, need()?)?),
            "--grad-reduce-in-bf16" => optimizer.grads_bf16 = true,
            "--accumulate-allreduce-grads-in-fp32" => optimizer.grads_fp32 = true,
            "--main-grads-dtype" => optimizer.main_grads = Some(need()?.to_string()),
            "--use-precision-aware-optimizer" => optimizer.aware = true,
            "--optimizer-cpu-offload" => optimizer.cpu_offload = true,
            "--optimizer-offload-fraction" => {
                optimizer.offload_fraction = Some(float(name, need()?)?)
            }
            "--overlap-cpu-optimizer-d2h-h2d" => optimizer.overlap_cpu = true,
            // Adam's classes are the same with it (megatron/core/optimizer/__init__.py).
            "--use-torch-optimizer-for-cpu-offload" => {}
            "--no-store-param-remainders" => optimizer.no_remainders = true,
            "--main-params-dtype" => optimizer.main_params = Some(need()?.to_string()),
            "--exp-avg-dtype" => optimizer.exp_avg = Some(need()?.to_string()),
            "--exp-avg-sq-dtype" => optimizer.exp_avg_sq = Some(need()?.to_string()),
            // Adam (Megatron-core's is AdamW's decoupled decay); Muon, or its layer-wise
            // distributed optimizer (ZeRO 1 here), whose state and step the model counts; SGD
            // is refused, not read as Adam.
            "--optimizer" => match need()? {
                "adam" => {
                    muon = None;
                    stated_adam = true;
                }
                "muon" => muon = Some(false),
                "dist_muon" => muon = Some(true),
                v => {
                    return Err(Error::invalid(
                        name.as_str(),
                        v,
                        "adam, muon or dist_muon: the optimizers whose state and step trainplan counts",
                    ))
                }
            },
            "--cuda-graph-impl" => graphs.0 = Some(need()?.to_string()),
            // `--cuda-graph-modules` is Megatron-LM's newer name for it (d98e8a6).
            "--cuda-graph-scope" | "--cuda-graph-modules" => graphs.1 = Some(need()?.to_string()),
            // RoPE by name; YaRN (latent attention's default there) is not planned.
            "--rope-type" => match need()? {
                "rope" => {}
                v => {
                    return Err(Error::invalid(
                        name.as_str(),
                        v,
                        "rope: plain RoPE (or Llama 3's scaling, --use-rope-scaling), the position encoding trainplan plans",
                    ))
                }
            },
            "--fp4-format" => fp4.0 = Some(need()?.to_string()),
            "--fp4-recipe" => fp4.1 = Some(need()?.to_string()),
            // A launcher's option after the program: Megatron-LM's parser refuses it.
            option if LAUNCHER_OPTIONS.contains(&option) => {
                return Err(Error::invalid(
                    option,
                    value.as_deref().unwrap_or("given"),
                    "before the program (pretrain_gpt.py): after it, it is the program's, which Megatron-LM's parser refuses",
                ))
            }
            option if STACK_OPTIONS.contains(&option) => from.stack_options.push(match value {
                Some(v) => format!("{option} {v}"),
                None => option.to_string(),
            }),
            option if FIXED.iter().any(|(o, _)| *o == option) => {
                let want = FIXED.iter().find(|(o, _)| *o == option).map(|(_, v)| *v);
                // Megatron-DeepSpeed spells it `rmsnorm`.
                let same = match (value.as_deref(), want) {
                    (Some(v), Some(w)) => v.eq_ignore_ascii_case(w),
                    _ => false,
                };
                if !same {
                    return Err(Error::invalid(
                        option,
                        value.as_deref().unwrap_or("no value"),
                        format!(
                            "{} (the blocks trainplan models: RMSNorm, RoPE, Transformer Engine)",
                            want.unwrap_or_default()
                        ),
                    ));
                }
            }
            option if megatron_options::UNUSED.contains(&option) => {
                from.unused.push(opt.text());
            }
            option if megatron_options::REFUSED.iter().any(|(o, _)| *o == option) => {
                let why = megatron_options::REFUSED
                    .iter()
                    .find(|(o, _)| *o == option)
                    .map_or("", |(_, why)| why);
                return Err(Error::invalid(
                    option,
                    value.as_deref().unwrap_or("given"),
                    format!("an option the plan can say, not this one ({why})"),
                ));
            }
            option if UNUSED_PREFIXES.iter().any(|p| option.starts_with(p)) => {
                from.unused.push(match value {
                    Some(v) => format!("{option} {v}"),
                    None => option.to_string(),
                });
            }
            option => {
                return Err(Error::invalid(
                    option,
                    value.as_deref().unwrap_or("given"),
                    "an option trainplan maps to the design or knows to leave the plan alone (take it out, or state it with trainplan's flags if it changes the design)",
                ))
            }
        }
            Ok(())
        })();
        match outcome {
            Ok(()) if from.unused.len() == unused_before => from.mapped.push(opt.text()),
            Ok(()) => {}
            Err(e) => problems.push((line, e)),
        }
    }
    #[allow(clippy::redundant_closure_call)]
    let finished = (|| -> Result<()> {
        // Precision: BF16 with Transformer Engine's FP8 recipes on top.
        // Megatron-LM's default dropout, 0.1 on the hidden states: the masks its fused
        // bias-dropout-add keeps (a byte an element, twice a layer) are not counted.
        let hidden_dropout = options
            .iter()
            .find(|o| o.name == "--hidden-dropout" && !o.launcher)
            .and_then(|o| o.value.as_deref())
            .and_then(|v| v.trim().parse::<f64>().ok());
        if hidden_dropout.is_none_or(|p| p > 0.0) {
            from.notes.push(format!(
                "--hidden-dropout {}: the dropout masks (a byte a token and hidden unit, twice a layer) are not counted in the activations",
                hidden_dropout.map_or("0.1 (Megatron-LM's default, not set)".to_string(), |p| p.to_string())
            ));
        }
        match (bf16, fp16) {
            (true, false) => {}
            // FP16 mixed precision keeps what BF16's does (16-bit weights and gradients, FP32
            // master weights and moments) and runs at the same dense tensor-core peak (A100,
            // H100, B200 datasheets: FP16 = BF16); its loss scale is a scalar.
            (false, true) => from.notes.push(
                "--fp16: FP16 mixed precision planned as BF16's 16-bit weights with FP32 master weights and moments, at the same dense tensor-core peak; its gradient buffers 16-bit, as Megatron-LM keeps them under --fp16 without --accumulate-allreduce-grads-in-fp32; dynamic loss scaling adds no memory the plan counts".into(),
            ),
            (true, true) => {
                return Err(Error::invalid(
                    "--fp16",
                    "given with --bf16",
                    "one of them (Megatron-LM refuses both)",
                ))
            }
            (false, false) => {
                return Err(Error::invalid(
                    "--bf16",
                    "missing",
                    "16-bit mixed precision (--bf16, or --fp16), the precision every plan keeps its weights in",
                ))
            }
        }
        // NVFP4: Megatron-LM's `--fp4-format e2m1`, its one `--fp4-recipe` (`nvfp4`, the default).
        match (fp4.0.as_deref(), fp4.1.as_deref()) {
        (None, None) => {}
        (Some("e2m1"), None | Some("nvfp4")) if fp8 == (None, None) => {}
        (format, recipe) => return Err(Error::invalid(
            "--fp4-format/--fp4-recipe",
            format!("{}/{}", format.unwrap_or("none"), recipe.unwrap_or("none")),
            "e2m1/nvfp4 (NVFP4) without an FP8 recipe, the FP4 recipe the precision model counts",
        )),
    }
        // Delayed scaling is FP8's default recipe (and MXFP8's its own): read as none, the way a
        // plan says it.
        let (precision, recipe) = match (fp8.0.as_deref(), fp8.1.as_deref()) {
        (None, None) if fp4.0.is_some() => (Precision::Nvfp4, None),
        (None, None) => (Precision::Bf16, None),
        // Megatron-core's TransformerConfig takes `fp8_recipe = "delayed"` unless told.
        (Some("hybrid"), Some("delayed") | None) => (Precision::Fp8, None),
        (Some("hybrid" | "e4m3"), Some("tensorwise")) => {
            (Precision::Fp8, Some(Fp8Recipe::Tensorwise))
        }
        (Some("hybrid" | "e4m3"), Some("blockwise")) => {
            (Precision::Fp8, Some(Fp8Recipe::Blockwise))
        }
        (Some("e4m3"), Some("mxfp8")) => (Precision::Mxfp8, None),
        (format, recipe) => return Err(Error::invalid(
            "--fp8-format/--fp8-recipe",
            format!("{}/{}", format.unwrap_or("none"), recipe.unwrap_or("none")),
            "hybrid/delayed, hybrid/tensorwise, hybrid/blockwise (FP8) or e4m3/mxfp8 (MXFP8), the recipes the precision model counts",
        )),
    };
        from.precision = Some(precision);
        from.fp8_recipe = recipe;
        if from.fp8_params == Some(true) && !precision.is_fp8() {
            return Err(Error::invalid(
                "--fp8-param-gather",
                "given",
                "an FP8 recipe beside it (--fp8-format, --fp8-recipe): the weights it keeps in FP8",
            ));
        }
        // What the file leaves out is Megatron-LM's default, which the file then says: BF16
        // weights, FP32 gradients, an FP32 optimizer state.
        let fp8_params = from.fp8_params == Some(true);
        from.fp8_params = Some(fp8_params);
        from.offload_activations = Some(from.offload_activations.unwrap_or(0));
        from.bf16_layers = Some(match bf16_layers {
        (false, None, None) => Bf16Layers::default(),
        (true, start, end) if precision != Precision::Bf16 => Bf16Layers {
            start: start.unwrap_or(1),
            end: end.unwrap_or(1),
        },
        (true, _, _) => {
            return Err(Error::invalid(
                "--first-last-layers-bf16",
                "given",
                "an FP8 recipe beside it (--fp8-format, --fp8-recipe): the other layers run in FP8",
            ))
        }
        (false, _, _) => return Err(Error::invalid(
            "--num-layers-at-start-in-bf16/--num-layers-at-end-in-bf16",
            "given",
            "given with --first-last-layers-bf16, without which Megatron-LM keeps no layer in BF16",
        )),
    });
        let (cpu_offload, aware) = (optimizer.cpu_offload, optimizer.aware);
        optimizer.apply(&mut from, fp8_params, fp16 && !bf16)?;
        // The loss: Megatron-core reads the fused cross-entropy's implementation only under
        // --cross-entropy-loss-fusion (`language_module.py`); otherwise, or with `native`, its own
        // keeps FP32 logits.
        let fused_loss = from
            .stack_options
            .iter()
            .any(|o| o == "--cross-entropy-loss-fusion");
        if let Some(te) = loss_impl {
            from.loss = Some(if te && fused_loss {
                LossPrecision::InPlace
            } else {
                LossPrecision::Fp32
            });
        }
        // Megatron-DeepSpeed: the engine's ZeRO stage (0 where not given), its stack.
        if deepspeed || ds_zero.is_some() {
            if !deepspeed || distributed || fsdp {
                return Err(Error::invalid(
                    "--zero-stage",
                    ds_zero.map_or("missing".into(), |z| z.to_string()),
                    "with --deepspeed and without Megatron-LM's distributed optimizer or Megatron-FSDP (Megatron-DeepSpeed's engine shards the state itself)",
                ));
            }
            from.zero = Some(ds_zero.unwrap_or(ZeroStage::new(0)?));
            from.stack = Some(crate::cost::step::stack::Stack::MegatronDeepspeed);
        }
        // ZeRO: the distributed optimizer is stage 1; Megatron-FSDP's strategies 2 and 3.
        if from.zero.is_none() {
            from.zero = Some(match (fsdp, strategy.as_deref()) {
                (false, None) => ZeroStage::new(u8::from(distributed))?,
                (true, Some("optim_grads")) => ZeroStage::new(2)?,
                (true, Some("optim_grads_params")) => ZeroStage::new(3)?,
                (_, s) => return Err(Error::invalid(
                    "--data-parallel-sharding-strategy",
                    s.unwrap_or("missing"),
                    "optim_grads (ZeRO 2) or optim_grads_params (ZeRO 3) with --use-megatron-fsdp",
                )),
            });
        }
        // Muon: its own optimizer under ZeRO 0 (`muon`) or its layer-wise distributed one under
        // ZeRO 1 (`dist_muon`), with no distributed optimizer beside it (Megatron-LM turns it off).
        if let Some(layer_wise) = muon {
            if cpu_offload || aware {
                return Err(Error::invalid(
                if cpu_offload {
                    "--optimizer-cpu-offload"
                } else {
                    "--use-precision-aware-optimizer"
                },
                "given with Muon",
                "left out with --optimizer muon or dist_muon (Megatron-core's Muon keeps FP32 state on the GPU)",
            ));
            }
            if distributed || fsdp {
                return Err(Error::invalid(
                "--optimizer",
                if layer_wise { "dist_muon" } else { "muon" },
                "without --use-distributed-optimizer or --use-megatron-fsdp (Megatron-LM runs Muon on its own, or layer-wise as dist_muon)",
            ));
            }
            from.optimizer = Some(crate::cost::step::recipe::Optimizer::Muon);
            from.zero = Some(ZeroStage::new(u8::from(layer_wise))?);
        } else if stated_adam {
            from.optimizer = Some(crate::cost::step::recipe::Optimizer::AdamW);
        }
        from.cuda_graphs = cuda_graphs(graphs.0.as_deref(), graphs.1.as_deref())?;
        // Megatron-LM's arguments.py turns sequence parallelism off at TP 1 ("Disabling sequence
        // parallelism because tensor model parallelism is disabled"), and so does the reading.
        if from.sequence_parallel == Some(true) && from.tp.unwrap_or(1) == 1 {
            from.notes.push(
            "--sequence-parallel at TP 1 is off, as Megatron-LM turns it off without tensor parallelism".into(),
        );
            from.sequence_parallel = Some(false);
        }
        from.sequence_parallel = Some(from.sequence_parallel.unwrap_or(false));
        from.tp_comm_overlap = Some(from.tp_comm_overlap.unwrap_or(false));
        from.recompute = Some(recompute.mode()?);
        let Modules {
            layernorm,
            mla_up_proj,
            moe,
            ..
        } = recompute.modules()?;
        // A vocabulary the file leaves to its tokenizer, where the tokenizer's type fixes it,
        // padded as Megatron-LM pads it (`_vocab_size_with_padding`: a multiple of
        // --make-vocab-size-divisible-by, 128 by default, times TP).
        if dims.vocab.is_none() && number_after(comments, "vocabulary ").is_none() {
            let tokenizer = options
                .iter()
                .find(|o| o.name == "--tokenizer-type")
                .and_then(|o| o.value.as_deref());
            if let Some((v, which)) = tokenizer.and_then(tokenizer_vocab) {
                let multiple = divisor
                    .unwrap_or(128)
                    .saturating_mul(from.tp.unwrap_or(1))
                    .max(1);
                let padded = v.div_ceil(multiple) * multiple;
                from.notes.push(format!(
                    "the vocabulary is {which}'s {v}, padded to {padded} as Megatron-LM pads it (a multiple of {multiple})"
                ));
                dims.vocab = Some(padded);
            }
        }
        dims.moe = experts.routed.is_some();
        let mut model = dims.build(from.tp.unwrap_or(1), divisor, comments)?;
        let layers = model.layers;
        let hybrid_experts = model.dims.hybrid.as_ref().map(|h| {
            h.blocks()
                .map(|b| b == crate::model::hybrid::Block::Moe)
                .collect::<Vec<bool>>()
        });
        model.dims.experts = experts.build(layers, model.dims.ffn, hybrid_experts, &mut from)?;
        // Latent attention's up-projections: stated where the arguments build latent attention;
        // for another model only where the file turns them on, which the design then refuses by
        // name.
        from.latent_recompute = if model.dims.latent.is_some() {
            Some(mla_up_proj)
        } else {
            mla_up_proj.then_some(true)
        };
        // How MoE layers run: stated for a mixture of experts; for a dense model only what the
        // file turns on, which the design then refuses by name.
        if model.dims.experts.is_some() {
            from.ep_overlap = Some(experts.overlap);
            from.moe_recompute = Some(moe);
            from.norm_recompute = Some(layernorm);
        } else {
            from.ep_overlap = experts.overlap.then_some(true);
            from.moe_recompute = (moe != MoeRecompute::None).then_some(moe);
            from.norm_recompute = layernorm.then_some(true);
        }
        let pp = from.pp.unwrap_or(1);
        if let Some(n) = virtual_layers {
            let per_stage = layers / pp.max(1);
            if layers % pp.max(1) != 0 || per_stage % n != 0 || per_stage / n < 2 {
                return Err(Error::invalid(
                "--num-layers-per-virtual-pipeline-stage",
                n,
                format!("layers a chunk that split each stage's {per_stage} layers into 2 or more chunks"),
            ));
            }
            from.schedule = Some(Schedule::Interleaved((per_stage / n) as u32));
        }
        if let Some((entries, text)) = &from.pipeline_layout {
            if entries % pp != 0 {
                return Err(Error::invalid(
                    "--pipeline-model-parallel-layout",
                    text,
                    format!("a whole number of chunks on each of the PP {pp} stages"),
                ));
            }
            let chunks = entries / pp;
            from.schedule = Some(match u32::try_from(chunks) {
                Ok(1) => Schedule::OneFOneB,
                Ok(v) => Schedule::Interleaved(v),
                Err(_) => {
                    return Err(Error::invalid(
                        "--pipeline-model-parallel-layout",
                        text,
                        "fewer chunks",
                    ))
                }
            });
        }
        if from.schedule.is_none() {
            from.schedule = Some(Schedule::OneFOneB);
        }
        if let Some(r) = recompute.layers {
            // The block method over half of each stage's layers is selective-layer.
            if from.recompute == Some(Recompute::SelectiveLayer) {
                let per_stage = layers / pp;
                if layers % pp != 0 || per_stage < 2 || r != per_stage / 2 {
                    return Err(Error::invalid(
                    "--recompute-num-layers",
                    r,
                    format!("half of each stage's {per_stage} layers, rounded down, with --recompute-method block (trainplan's selective-layer)"),
                ));
                }
            }
        }
        let seq = from.seq_len;
        if let (Some(max), Some(s)) = (model.max_positions, seq) {
            if max < s {
                return Err(Error::invalid(
                    "--max-position-embeddings",
                    max,
                    format!("at least --seq-length {s}"),
                ));
            }
        }
        from.model = FileModel::Dims(Box::new(model.dims));
        // Tokens: the steps of G sequences, or the samples, of s tokens.
        let s =
            seq.ok_or_else(|| Error::invalid("--seq-length", "missing", "the sequence length"))?;
        let scheduled = match &step_schedule {
            None => None,
            // Megatron-LM refuses it beside a global batch; without the schedule the
            // global batch is the plan (--lenient).
            Some((text, line)) if from.global_batch.is_some() => {
                problems.push((*line, Error::invalid(
                    "--step-batch-size-schedule",
                    text.escape_debug(),
                    "no --global-batch-size beside it: Megatron-LM refuses both (arguments.py: \"Cannot specify both --step-batch-size-schedule and --global-batch-size\")",
                )));
                None
            }
            Some((text, _)) => {
                let schedule = BatchSchedule::parse(text, s)?;
                let (last, consumed) = schedule.run(iters, samples)?;
                from.global_batch = Some(last);
                from.notes.push(format!(
                "--step-batch-size-schedule: planned at the largest global batch the run reaches, {last} sequences; its first {} tokens run at smaller batches, whose slower steps the plan does not count (nor does it check those batches divide by micro-batch × DP, as Megatron-LM does each step)",
                schedule.ramp_samples(last).saturating_mul(s)
            ));
                Some(times("--step-batch-size-schedule", consumed, s)?)
            }
        };
        let g = from.global_batch.ok_or_else(|| {
            Error::invalid(
                "--global-batch-size",
                "missing",
                "the global batch, sequences",
            )
        })?;
        one_length(iters, samples)?;
        from.tokens = Some(match (scheduled, iters, samples) {
            (Some(tokens), _, _) => tokens,
            (None, Some(i), _) => times("--train-iters", times("--global-batch-size", g, s)?, i)?,
            (None, _, n) => times("--train-samples", n.unwrap_or(0), s)?,
        });
        if from.gpus.is_none() {
            from.gpus = number_after(comments, "Launch on ");
        }
        // The split the export names where it is not the stack's (`(--stages llama3)`).
        from.stages = comments.iter().find_map(|c| {
            let name = c.split_once("(--stages ")?.1.split_once(')')?.0;
            [
                StageSplit::Even,
                StageSplit::Llama3,
                StageSplit::Balanced,
                StageSplit::Loss,
            ]
            .into_iter()
            .find(|s| {
                serde_json::to_value(s)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .as_deref()
                    == Some(name)
            })
        });
        Ok(())
    })();
    match finished {
        Ok(()) => {
            from.refused = report(&problems);
            Ok(from)
        }
        Err(e) if problems.is_empty() => Err(e),
        Err(e) => {
            problems.push((0, e));
            let lines = report(&problems);
            Err(if lines.len() == 1 {
                Error::Problems(lines)
            } else {
                super::design::refusal(lines, &from, false)
            })
        }
    }
}

#[derive(Default)]
struct RecomputeBuilder {
    granularity: Option<String>,
    method: Option<String>,
    layers: Option<u64>,
    /// `--recompute-modules`, its words.
    modules: Option<String>,
}

/// Megatron-core's recompute modules trainplan models (`transformer_config.py`'s
/// `recompute_modules`): core attention (selective recomputation), the MoE layers' norm, latent
/// attention's up-projections, the MoE layers' SwiGLU output, or the whole MoE layer.
const MODULES: [&str; 5] = ["core_attn", "layernorm", "mla_up_proj", "moe_act", "moe"];

/// What the modules of `--recompute-modules` recompute, as [`RecomputeBuilder::modules`] reads
/// them.
struct Modules {
    core_attn: bool,
    layernorm: bool,
    mla_up_proj: bool,
    moe: MoeRecompute,
}

impl RecomputeBuilder {
    /// Which of [`MODULES`] are recomputed: core attention, the norm, latent attention's
    /// up-projections and the MoE layers' part. Megatron-core's default under selective
    /// granularity is core attention alone.
    fn modules(&self) -> Result<Modules> {
        let Some(list) = &self.modules else {
            return Ok(Modules {
                core_attn: self.granularity.as_deref() == Some("selective"),
                layernorm: false,
                mla_up_proj: false,
                moe: MoeRecompute::None,
            });
        };
        if self.granularity.as_deref() != Some("selective") {
            return Err(Error::invalid(
                "--recompute-modules",
                list,
                "given with --recompute-granularity selective, which they are for",
            ));
        }
        let words: Vec<&str> = list.split_whitespace().collect();
        if let Some(bad) = words.iter().find(|w| !MODULES.contains(w)) {
            return Err(Error::invalid(
                "--recompute-modules",
                list,
                format!(
                    "modules trainplan models ({}); {bad} is none",
                    MODULES.join(", ")
                ),
            ));
        }
        let has = |m: &str| words.contains(&m);
        let moe = match (has("moe_act"), has("moe")) {
            (false, false) => MoeRecompute::None,
            (true, false) => MoeRecompute::Act,
            (false, true) => MoeRecompute::Layer,
            (true, true) => {
                return Err(Error::invalid(
                    "--recompute-modules",
                    list,
                    "moe_act or moe, not both (the whole MoE layer holds its SwiGLU output)",
                ))
            }
        };
        Ok(Modules {
            core_attn: has("core_attn"),
            layernorm: has("layernorm"),
            mla_up_proj: has("mla_up_proj"),
            moe,
        })
    }

    fn mode(&self) -> Result<Recompute> {
        match (
            self.granularity.as_deref(),
            self.method.as_deref(),
            self.layers,
        ) {
            (None, None, None) => Ok(Recompute::None),
            // Selective granularity without core attention among its modules recomputes only
            // what the modules say (the MoE layers' parts): the step's own mode is none.
            (Some("selective"), None, None) if !self.modules()?.core_attn => Ok(Recompute::None),
            (Some("selective"), None, None) => Ok(Recompute::Selective),
            (Some("full"), Some("uniform"), Some(1)) => Ok(Recompute::Full),
            (Some("full"), Some("block"), Some(_)) => Ok(Recompute::SelectiveLayer),
            (g, m, n) => Err(Error::invalid(
                "--recompute-granularity",
                format!(
                    "{} with --recompute-method {} and --recompute-num-layers {}",
                    g.unwrap_or("none"),
                    m.unwrap_or("none"),
                    n.map_or("none".into(), |n| n.to_string())
                ),
                "selective; full, uniform, 1 layer (full); or full, block, half a stage's layers (selective-layer)",
            )),
        }
    }
}

#[derive(Default)]
struct ExpertsBuilder {
    routed: Option<u64>,
    per_token: Option<u64>,
    groups: Option<u64>,
    group_topk: Option<u64>,
    ffn: Option<u64>,
    shared_ffn: Option<u64>,
    layers: Option<String>,
    grouped_gemm: bool,
    dispatcher: Option<String>,
    deepep: bool,
    overlap: bool,
    score_bias: bool,
    score_function: Option<String>,
}

impl ExpertsBuilder {
    /// The mixture of experts of a model of `layers` layers whose dense FFN is `ffn` wide
    /// (Megatron-LM's default expert width), with its dispatcher set on `from`; `None` for a
    /// dense model, whose file must then give no expert option.
    /// A hybrid's experts sit on its pattern's `E` blocks (`hybrid`, a flag a layer), which
    /// `--moe-layer-freq` may not restate.
    fn build(
        &self,
        layers: u64,
        ffn: u64,
        hybrid: Option<Vec<bool>>,
        from: &mut FromFile,
    ) -> Result<Option<FileExperts>> {
        let Some(routed) = self.routed else {
            let given = [
                ("--moe-router-topk", self.per_token.is_some()),
                ("--moe-router-num-groups", self.groups.is_some()),
                ("--moe-router-group-topk", self.group_topk.is_some()),
                ("--moe-ffn-hidden-size", self.ffn.is_some()),
                (
                    "--moe-shared-expert-intermediate-size",
                    self.shared_ffn.is_some(),
                ),
                ("--moe-layer-freq", self.layers.is_some()),
                ("--moe-router-enable-expert-bias", self.score_bias),
                ("--moe-grouped-gemm", self.grouped_gemm),
                ("--moe-token-dispatcher-type", self.dispatcher.is_some()),
                ("--moe-enable-deepep", self.deepep),
                (
                    "--expert-model-parallel-size",
                    from.ep.is_some_and(|e| e > 1),
                ),
            ];
            if let Some((option, _)) = given.iter().find(|(_, g)| *g) {
                return Err(Error::invalid(
                    *option,
                    "given without --num-experts",
                    "a mixture of experts' option with its experts (--num-experts), or left out for a dense model",
                ));
            }
            return Ok(None);
        };
        if !self.grouped_gemm {
            return Err(Error::invalid(
                "--moe-grouped-gemm",
                "missing",
                "the experts' grouped GEMMs (--moe-grouped-gemm), which the time model costs",
            ));
        }
        from.ep_dispatcher = Some(match (self.dispatcher.as_deref(), self.deepep) {
            (Some("alltoall"), false) => Dispatcher::AllToAll,
            (Some("flex"), true) => Dispatcher::DeepEp,
            (d, deepep) => return Err(Error::invalid(
                "--moe-token-dispatcher-type",
                format!(
                    "{}{}",
                    d.unwrap_or("missing (Megatron-LM's allgather)"),
                    if deepep {
                        " with --moe-enable-deepep"
                    } else {
                        ""
                    }
                ),
                "alltoall, or flex with --moe-enable-deepep: the dispatchers the time model costs",
            )),
        });
        let layers =
            match (self.layers.as_deref(), hybrid) {
                (None, hybrid) => hybrid,
                (Some(text), None) => Some(layer_pattern(text, layers)?),
                (Some(text), Some(_)) => return Err(Error::invalid(
                    "--moe-layer-freq",
                    text,
                    "left out with --hybrid-override-pattern, whose E blocks are the MoE layers",
                )),
            };
        // Megatron-core's expert bias (auxiliary-loss-free balancing) goes with sigmoid
        // scores only (`TransformerConfig`).
        match (self.score_bias, self.score_function.as_deref()) {
            (_, None | Some("sigmoid")) | (false, Some("softmax")) => {}
            (_, Some(f)) => {
                return Err(Error::invalid(
                    "--moe-router-score-function",
                    f,
                    if self.score_bias {
                        "sigmoid with --moe-router-enable-expert-bias (Megatron-core's rule)"
                    } else {
                        "softmax or sigmoid, Megatron-core's"
                    },
                ))
            }
        }
        if self.score_bias && self.score_function.as_deref() != Some("sigmoid") {
            return Err(Error::invalid(
                "--moe-router-enable-expert-bias",
                "without --moe-router-score-function sigmoid",
                "with sigmoid scores (Megatron-core's rule)",
            ));
        }
        // Megatron-core routes in groups with both options (`group_limited_topk`).
        let groups = match (self.groups, self.group_topk) {
            (None, None) => None,
            (Some(count), Some(per_token)) => {
                let to32 = |option: &str, v: u64| {
                    u32::try_from(v).map_err(|_| Error::invalid(option, v, "a count below 2^32"))
                };
                Some(crate::model::Groups {
                    count: to32("--moe-router-num-groups", count)?,
                    per_token: to32("--moe-router-group-topk", per_token)?,
                })
            }
            (Some(_), None) | (None, Some(_)) => {
                let (given, missing) = if self.groups.is_some() {
                    ("--moe-router-num-groups", "--moe-router-group-topk")
                } else {
                    ("--moe-router-group-topk", "--moe-router-num-groups")
                };
                return Err(Error::invalid(
                    given,
                    "given alone",
                    format!("with {missing}: Megatron-core limits routing to groups with both"),
                ));
            }
        };
        Ok(Some(FileExperts {
            routed,
            // Megatron-LM's defaults: the top 2, experts as wide as the dense FFN.
            per_token: self.per_token.unwrap_or(2),
            ffn: self.ffn.unwrap_or(ffn),
            shared_ffn: self.shared_ffn.unwrap_or(0),
            layers,
            groups,
            score_bias: self.score_bias,
        }))
    }
}

/// `--moe-layer-freq` as a flag a layer: a list of 1 (MoE) and 0 (dense), one a layer, or a
/// whole number `n`, every `n`-th layer from the first (Megatron-LM's two forms).
fn layer_pattern(text: &str, layers: u64) -> Result<Vec<bool>> {
    if let Ok(n) = text.trim().parse::<u64>() {
        if n == 0 {
            return Err(Error::invalid(
                "--moe-layer-freq",
                text,
                format!("a list of {layers} flags, 1 for an MoE layer and 0 for a dense one ([1,0,…]), or a whole number n, every n-th layer"),
            ));
        }
        return Ok((0..layers).map(|i| i % n == 0).collect());
    }
    flags_of("--moe-layer-freq", text, layers)
}

/// A Python list of `layers` flags, 1 and 0 (`[1,0,…]`), for `option`.
fn flags_of(option: &str, text: &str, layers: u64) -> Result<Vec<bool>> {
    let bad = || {
        Error::invalid(
            option,
            text,
            format!("a list of {layers} flags of 1 and 0 ([1,0,…]), or a whole number n ≥ 1"),
        )
    };
    // A list, or a list repeated (`[1,0]*18`, a Python expression Megatron-LM evaluates).
    let (list, times) = match text.trim().rsplit_once("]*") {
        Some((list, n)) => (
            format!("{list}]"),
            n.trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(bad)?,
        ),
        None => (text.trim().to_string(), 1),
    };
    let inner = list
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(bad)?;
    let flags = inner
        .split(',')
        .map(|f| match f.trim() {
            "1" => Ok(true),
            "0" => Ok(false),
            _ => Err(bad()),
        })
        .collect::<Result<Vec<bool>>>()?
        .repeat(times);
    if flags.len() as u64 != layers {
        return Err(bad());
    }
    Ok(flags)
}

/// The training length given once: `--train-iters` or `--train-samples`, not both, not neither.
fn one_length(iters: Option<u64>, samples: Option<u64>) -> Result<()> {
    match (iters, samples) {
        (None, None) => Err(Error::invalid(
            "--train-iters",
            "missing",
            "the training length (--train-iters or --train-samples)",
        )),
        (Some(_), Some(_)) => Err(Error::invalid(
            "--train-samples",
            "given with --train-iters",
            "one of them",
        )),
        _ => Ok(()),
    }
}

/// Megatron-core's step batch-size schedule (`--step-batch-size-schedule "0:16 2.4B:320 …"`,
/// `StepBatchsizeNumMicroBatchesCalculator` in `megatron/core/num_microbatches_calculator.py`):
/// each entry a threshold of tokens consumed (suffixes K, M, B, T; converted to samples by
/// floor division by the sequence length) and the global batch, sequences, from there on. Each
/// iteration takes the batch of the last threshold the samples consumed so far reach.
#[derive(Debug, Clone, PartialEq)]
struct BatchSchedule {
    /// (threshold in samples, global batch), the thresholds increasing from 0.
    entries: Vec<(u64, u64)>,
}

impl BatchSchedule {
    /// Megatron-core's `_parse_numeric_value`: `int(float(v) × suffix)`.
    fn number(text: &str, whole: &str) -> Result<u64> {
        let v = text.trim().to_ascii_uppercase();
        let (digits, scale) = match v.char_indices().last() {
            Some((i, 'T')) => (&v[..i], 1e12),
            Some((i, 'B')) => (&v[..i], 1e9),
            Some((i, 'M')) => (&v[..i], 1e6),
            Some((i, 'K')) => (&v[..i], 1e3),
            _ => (v.as_str(), 1.0),
        };
        match digits.parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 && x * scale < 1.8e19 => Ok((x * scale) as u64),
            _ => Err(Error::invalid(
                "--step-batch-size-schedule",
                whole.escape_debug(),
                format!("entries THRESHOLD:BATCH of numbers with K, M, B or T suffixes ({text} is none)"),
            )),
        }
    }

    fn parse(text: &str, seq: u64) -> Result<BatchSchedule> {
        let bad =
            |why: &str| Error::invalid("--step-batch-size-schedule", text.escape_debug(), why);
        let mut entries = Vec::new();
        for entry in text.replace(',', " ").split_whitespace() {
            let (t, b) = entry
                .split_once(':')
                .ok_or_else(|| bad("entries THRESHOLD:BATCH"))?;
            entries.push((Self::number(t, text)? / seq.max(1), Self::number(b, text)?));
        }
        entries.sort_by_key(|e| e.0);
        match entries.first() {
            None => return Err(bad("at least one entry")),
            Some((t, _)) if *t != 0 => return Err(bad("a first entry at threshold 0")),
            _ => {}
        }
        if entries.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(bad("thresholds that increase"));
        }
        if entries.iter().any(|e| e.1 == 0) {
            return Err(bad("batches of at least one sequence"));
        }
        // Megatron-core asserts the micro-batches a step never decrease.
        if entries.windows(2).any(|w| w[1].1 < w[0].1) {
            return Err(bad(
                "batches that never decrease (Megatron-core asserts it)",
            ));
        }
        Ok(BatchSchedule { entries })
    }

    /// The samples consumed before `batch` holds.
    fn ramp_samples(&self, batch: u64) -> u64 {
        self.entries
            .iter()
            .find(|e| e.1 == batch)
            .map_or(0, |e| e.0)
    }

    /// The largest global batch the run reaches (the last entry's, or an earlier one's when the
    /// run ends before the last threshold) and the samples consumed after `iters` iterations,
    /// or once `samples` are reached (Megatron-LM's `update_train_iters`: iterations until the
    /// samples consumed reach `--train-samples`).
    fn run(&self, iters: Option<u64>, samples: Option<u64>) -> Result<(u64, u64)> {
        one_length(iters, samples)?;
        let (mut consumed, mut done, mut last) = (0u64, 0u64, 0u64);
        for (k, &(_, batch)) in self.entries.iter().enumerate() {
            // This entry's batch holds until the consumed samples reach the next threshold.
            let end = self.entries.get(k + 1).map_or(u64::MAX, |e| e.0);
            let goal = match (iters, samples) {
                (None, Some(n)) => end.min(n),
                _ => end,
            };
            if consumed >= goal {
                continue;
            }
            let mut steps = (goal - consumed).div_ceil(batch);
            if let (Some(i), None) = (iters, samples) {
                steps = steps.min(i - done);
            }
            if steps > 0 {
                last = batch;
            }
            done += steps;
            consumed = steps
                .checked_mul(batch)
                .and_then(|c| c.checked_add(consumed))
                .ok_or_else(|| {
                    Error::invalid(
                        "--step-batch-size-schedule",
                        "its samples",
                        "fewer than 2^64",
                    )
                })?;
        }
        Ok((last.max(self.entries[0].1), consumed))
    }
}

#[derive(Default)]
struct DimsBuilder {
    layers: Option<u64>,
    hidden: Option<u64>,
    ffn: Option<u64>,
    heads: Option<u64>,
    kv_heads: Option<u64>,
    gqa: bool,
    head_dim: Option<u64>,
    vocab: Option<u64>,
    swiglu: bool,
    norm_eps: Option<f64>,
    rope_theta: Option<f64>,
    rope_scaling: bool,
    sliding_window: Option<u64>,
    untied: bool,
    no_bias: bool,
    qkv_bias: bool,
    max_positions: Option<u64>,
    qk_norm: bool,
    latent: bool,
    q_lora_rank: Option<u64>,
    kv_lora_rank: Option<u64>,
    qk_head_dim: Option<u64>,
    qk_pos_emb_head_dim: Option<u64>,
    v_head_dim: Option<u64>,
    mtp: Option<u64>,
    window_skip: Option<String>,
    squared_relu: bool,
    no_position: bool,
    /// `--position-embedding-type rope` or `none` given (Megatron-LM's default, and
    /// `learned_absolute`, is a learned table of `--max-position-embeddings` rows).
    position_given: bool,
    /// `--normalization` (Megatron-LM's default is LayerNorm).
    norm: Option<Norm>,
    /// `--use-rotary-position-embeddings` (Megatron-DeepSpeed's), which wins over
    /// `--position-embedding-type`.
    rotary_forced: bool,
    /// Experts given (`--num-experts`).
    moe: bool,
    hybrid: bool,
    pattern: Option<String>,
    mamba_heads: Option<u64>,
    mamba_head_dim: Option<u64>,
    mamba_groups: Option<u64>,
    mamba_state: Option<u64>,
    spec: bool,
}

struct Built {
    dims: Dims,
    layers: u64,
    max_positions: Option<u64>,
}

impl DimsBuilder {
    /// The hybrid Mamba-2 model the arguments build (`--hybrid-override-pattern`, read with
    /// or without `--is-hybrid-model`), at Megatron-core's defaults where an option is left
    /// out (`TransformerConfig`): state 128, heads of 64 in 8 groups, `2h/64` heads, and its
    /// 4-tap convolution; `None` without a pattern.
    fn hybrid(&self, layers: u64, hidden: u64) -> Result<Option<crate::model::Hybrid>> {
        let Some(pattern) = &self.pattern else {
            let given = [
                ("--is-hybrid-model", self.hybrid),
                ("--spec", self.spec),
                ("--mamba-num-heads", self.mamba_heads.is_some()),
                ("--mamba-head-dim", self.mamba_head_dim.is_some()),
                ("--mamba-num-groups", self.mamba_groups.is_some()),
                ("--mamba-state-dim", self.mamba_state.is_some()),
            ];
            if let Some((option, _)) = given.iter().find(|(_, g)| *g) {
                return Err(Error::invalid(
                    *option,
                    "given without --hybrid-override-pattern",
                    "a hybrid model's pattern of blocks (--hybrid-override-pattern), which trainplan reads rather than --hybrid-attention-ratio and --hybrid-mlp-ratio",
                ));
            }
            return Ok(None);
        };
        let to32 = |option: &str, v: u64| {
            u32::try_from(v).map_err(|_| Error::invalid(option, v, "a count below 2^32"))
        };
        let head_dim = self.mamba_head_dim.unwrap_or(64);
        let heads = match self.mamba_heads {
            Some(h) => h,
            None => 2 * hidden / head_dim.max(1),
        };
        let hybrid = crate::model::Hybrid {
            pattern: pattern.clone(),
            mamba: crate::model::hybrid::Mamba {
                heads: to32("--mamba-num-heads", heads)?,
                head_dim,
                groups: to32("--mamba-num-groups", self.mamba_groups.unwrap_or(8))?,
                state: self.mamba_state.unwrap_or(128),
                conv_kernel: 4,
            },
            gated: self.swiglu,
        };
        let layers = u32::try_from(layers)
            .map_err(|_| Error::invalid("--num-layers", layers, "a count below 2^32"))?;
        hybrid
            .validate("megatron", layers)
            .map_err(|e| Error::invalid("--hybrid-override-pattern", pattern, e.to_string()))?;
        Ok(Some(hybrid))
    }

    fn build(self, tp: u64, divisor: Option<u64>, comments: &[String]) -> Result<Built> {
        let need = |option: &str, v: Option<u64>| {
            v.ok_or_else(|| Error::invalid(option, "missing", "the model's dimension"))
        };
        // A later Megatron-LM counts a hybrid's layers from its pattern when not given.
        let layers = match (self.layers, &self.pattern) {
            (None, Some(p)) if self.hybrid || self.spec => {
                let n = p.chars().filter(|c| "M*-E".contains(*c)).count() as u64;
                need("--num-layers", (n > 0).then_some(n))?
            }
            (layers, _) => need("--num-layers", layers)?,
        };
        let hidden = need("--hidden-size", self.hidden)?;
        // Megatron-LM's default FFN width (`arguments.py`): 4h, or with SwiGLU two thirds of
        // it rounded down to a multiple of 64.
        let ffn = self.ffn.unwrap_or(if self.swiglu {
            (8 * hidden / 3) / 64 * 64
        } else {
            4 * hidden
        });
        let heads = need("--num-attention-heads", self.heads)?;
        let kv_heads = match (self.gqa, self.kv_heads) {
            (true, Some(k)) => k,
            (false, None) => heads,
            (true, None) => {
                return Err(Error::invalid(
                    "--num-query-groups",
                    "missing",
                    "the KV heads with --group-query-attention",
                ))
            }
            (false, Some(k)) => {
                return Err(Error::invalid(
                    "--num-query-groups",
                    k,
                    "given with --group-query-attention",
                ))
            }
        };
        let hybrid = self.hybrid(layers, hidden)?;
        // The MLP: SwiGLU, squared ReLU, or Megatron-LM's default GeLU, a hybrid's MLP blocks
        // too ([`crate::model::Hybrid::gated`] says whether they are gated).
        let mlp = match (self.swiglu, self.squared_relu, hybrid.is_some()) {
            (true, true, _) => {
                return Err(Error::invalid(
                    "--squared-relu",
                    "given with --swiglu",
                    "one MLP activation",
                ))
            }
            (true, false, _) => Mlp::Swiglu,
            (false, true, _) => Mlp::SquaredRelu,
            (false, false, _) => Mlp::Gelu,
        };
        // Positions: RoPE, none in a hybrid, or Megatron-LM's default, a learned table.
        // A hybrid's `none` is no table; so is RoPE (its attention blocks rotate, nothing to
        // count). A hybrid builds a learned table too when the arguments leave the type
        // (Megatron-LM's `HybridModel` takes `--position-embedding-type`).
        let positions = if self.position_given {
            if self.no_position && hybrid.is_none() {
                return Err(Error::invalid(
                    "--position-embedding-type",
                    "none",
                    "rope or learned_absolute outside a hybrid Mamba-2 model (the blocks trainplan models)",
                ));
            }
            Positions::Rope
        } else {
            let rows = self.max_positions.ok_or_else(|| {
                Error::invalid(
                    "--max-position-embeddings",
                    "missing",
                    "the rows of the learned position table (Megatron-LM's default --position-embedding-type, learned_absolute), which Megatron-LM requires",
                )
            })?;
            Positions::Learned { rows }
        };
        let style = Style {
            norm: self.norm.unwrap_or(Norm::LayerNorm),
            mlp,
            positions,
        };
        if hybrid.is_some() && style.norm != Norm::RmsNorm {
            return Err(Error::invalid(
                "--normalization",
                if self.norm.is_some() {
                    "LayerNorm"
                } else {
                    "missing (Megatron-LM's default, LayerNorm)"
                },
                "RMSNorm in a hybrid Mamba-2 model (its blocks' norm)",
            ));
        }
        // Megatron-LM asserts it (arguments.py): multi-token prediction reads RoPE positions.
        if matches!(style.positions, Positions::Learned { .. }) && self.mtp.is_some_and(|d| d > 0) {
            return Err(Error::invalid(
                "--mtp-num-layers",
                self.mtp.unwrap_or(0),
                "none with learned absolute positions, as Megatron-LM asserts (--position-embedding-type rope)",
            ));
        }
        // Megatron-core's grouped experts with biases (fc1, fc2 and the router's) are neither
        // counted here nor run with its default bias-dropout fusion (experts.py asserts).
        if !self.no_bias && self.moe {
            return Err(Error::invalid(
                "--disable-bias-linear",
                "missing, with experts",
                "experts without biases (--disable-bias-linear, optionally --add-qkv-bias): the mixtures trainplan counts; Megatron-LM's default biases on grouped experts need bias-dropout fusion off",
            ));
        }
        let biases = match (self.no_bias, self.qkv_bias) {
            (true, false) => Biases::default(),
            (true, true) => Biases {
                qkv: true,
                output: false,
                mlp: false,
            },
            (false, false) => Biases {
                qkv: true,
                output: true,
                mlp: true,
            },
            (false, true) => return Err(Error::invalid(
                "--add-qkv-bias",
                "without --disable-bias-linear",
                "--disable-bias-linear --add-qkv-bias (q/k/v biases only), or neither (all biases)",
            )),
        };
        // Multi-head latent attention (`--multi-latent-attention`) at Megatron-LM's argument
        // defaults where an option is left out (`arguments.py`): no query latent, a key-value
        // latent of 32, query-key heads of 128 + 64, values of 128; its latent norms are
        // `--qk-layernorm`.
        let latent = self.latent.then(|| crate::model::Latent {
            q_rank: self.q_lora_rank,
            kv_rank: self.kv_lora_rank.unwrap_or(32),
            nope_dim: self.qk_head_dim.unwrap_or(128),
            rope_dim: self.qk_pos_emb_head_dim.unwrap_or(64),
            v_dim: self.v_head_dim.unwrap_or(128),
        });
        let head_dim = match &latent {
            Some(l) => Some(l.nope_dim + l.rope_dim),
            None => self.head_dim,
        };
        // Megatron-core's `window_attn_skip_freq`: an integer N windows every layer but each
        // N-th (1-indexed, `layer_number % N != 0`), a list names them (1 windowed, 0 full);
        // without `--window-size` it is read and not used, as Megatron-core ignores it.
        let window_layers = match &self.window_skip {
            _ if self.sliding_window.is_none() => None,
            None => None,
            Some(text) => {
                let flags = match text.trim().parse::<u64>() {
                    Ok(n) if n > 0 => (0..layers).map(|i| (i + 1) % n != 0).collect(),
                    _ => flags_of("--window-attn-skip-freq", text, layers)?,
                };
                let windowed: Vec<u32> =
                    (0..layers as u32).filter(|&i| flags[i as usize]).collect();
                (windowed.len() as u64 != layers)
                    .then(|| crate::model::LayerSet::from_list(windowed, layers as u32))
            }
        };
        let mtp = match self.mtp {
            None => 0,
            Some(d) => u32::try_from(d).map_err(|_| {
                Error::invalid(
                    "--mtp-num-layers",
                    d,
                    "a whole number of at most 4294967295",
                )
            })?,
        };
        let vocab = self.vocab.or_else(|| number_after(comments, "vocabulary "));
        if let (Some(v), Some(d)) = (vocab, divisor) {
            if v % d.saturating_mul(tp) != 0 {
                return Err(Error::invalid(
                    "--make-vocab-size-divisible-by",
                    d,
                    format!("a divisor that with TP {tp} divides the vocabulary {v}: Megatron-LM would pad it with rows the plan does not count"),
                ));
            }
        }
        Ok(Built {
            dims: Dims {
                layers,
                hidden,
                ffn,
                heads,
                kv_heads,
                head_dim,
                vocab,
                tied_embeddings: !self.untied,
                biases,
                // Megatron-LM's defaults: RoPE base 10,000, ε 1e-5.
                rope_theta: self.rope_theta.unwrap_or(10_000.0),
                rope_scaling: self.rope_scaling,
                norm_eps: self.norm_eps.unwrap_or(1e-5),
                sliding_window: self.sliding_window,
                window_layers,
                qk_norm: self.qk_norm,
                latent,
                mtp,
                experts: None,
                hybrid,
                style,
            },
            layers,
            max_positions: self.max_positions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt_defaults_are_read_as_megatron_lm_builds_them() {
        let gpt = "--num-layers 2 --hidden-size 256 --num-attention-heads 2 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 --train-iters 10 --vocab-size 1024";
        // FP16 keeps 16-bit gradient buffers unless told to accumulate in FP32.
        let f = parse(&format!("{gpt} --fp16")).unwrap();
        assert_eq!(f.gradients, Some(GradientPrecision::Bf16));
        let f = parse(&format!(
            "{gpt} --fp16 --accumulate-allreduce-grads-in-fp32"
        ))
        .unwrap();
        assert_eq!(f.gradients, Some(GradientPrecision::Fp32));
        // Megatron-DeepSpeed's RoPE switch wins over the type, in either order.
        for order in [
            "--use-rotary-position-embeddings --position-embedding-type learned_absolute",
            "--position-embedding-type learned_absolute --use-rotary-position-embeddings",
        ] {
            match parse(&format!("{gpt} --bf16 {order}")).unwrap().model {
                FileModel::Dims(d) => assert_eq!(d.style.positions, Positions::Rope, "{order}"),
                other => panic!("{other:?}"),
            }
        }
        // What Megatron-LM asserts against, or what the counts leave out, is refused.
        let e = parse(&format!("{gpt} --bf16 --mtp-num-layers 1"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--mtp-num-layers"), "{e}");
        let e = parse(&format!("{gpt} --bf16 --num-experts 4 --moe-grouped-gemm --moe-router-load-balancing-type aux_loss --moe-token-dispatcher-type alltoall"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--disable-bias-linear = missing, with experts"),
            "{e}"
        );
    }

    #[test]
    fn a_step_batch_schedule_runs_as_megatron_core_runs_it() {
        // NVIDIA's GPT-3 175B schedule at 2,048 tokens a sequence: 500,000 iterations consume
        // 649,446,688 samples, and 100,000 samples take 6,250 iterations of 16 — both counted
        // iteration by iteration as `_get_batch_size_for_samples` picks each batch.
        let s = BatchSchedule::parse("0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232 12B:1536", 2048)
            .unwrap();
        assert_eq!(s.entries[1], (2_400_000_000 / 2048, 320));
        assert_eq!(s.run(Some(500_000), None).unwrap(), (1536, 649_446_688));
        assert_eq!(s.run(None, Some(100_000)).unwrap(), (16, 100_000));
        // A run that ends before the last threshold is planned at the batch it reaches.
        assert_eq!(s.run(None, Some(1000)).unwrap(), (16, 1008));
        assert!(s.run(None, None).is_err() && s.run(Some(1), Some(1)).is_err());
        for bad in [
            "",
            "5000:16",
            "0:16 100:32",
            "0:16 1x:2",
            "0:0",
            "0:16 2M:32 3M:8",
        ] {
            assert!(BatchSchedule::parse(bad, 2048).is_err(), "{bad}");
        }
    }

    #[test]
    fn cuda_graphs_are_read_by_implementation_and_scope() {
        use crate::cost::step::graphs::CudaGraphs;
        let graphs = |extra: &str| parse(&script(extra, "")).map(|f| f.cuda_graphs);
        assert_eq!(graphs("").unwrap(), None);
        let partial = graphs(
            "  --cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess --cuda-graph-warmup-steps 3",
        )
        .unwrap()
        .unwrap();
        assert_eq!(partial.to_string(), "attn,moe_router,moe_preprocess");
        assert_eq!(
            graphs("  --cuda-graph-impl local --cuda-graph-scope full_iteration").unwrap(),
            Some(CudaGraphs::FULL)
        );
        // Megatron-LM ignores a scope without an implementation.
        assert_eq!(
            graphs("  --cuda-graph-scope attn").unwrap(),
            Some(CudaGraphs::NONE)
        );
        // Whole layers captured, a scope that is not Megatron-core's, an implementation that is
        // not: each refused by name.
        for (extra, needle) in [
            (
                "  --cuda-graph-impl local",
                "--cuda-graph-scope = none given",
            ),
            (
                "  --cuda-graph-impl transformer_engine --cuda-graph-scope moe",
                "token-dropping",
            ),
            (
                "  --cuda-graph-impl transformer_engine --cuda-graph-scope attn layer",
                "--cuda-graph-scope = attn layer",
            ),
            ("  --cuda-graph-impl cudnn", "--cuda-graph-impl = cudnn"),
        ] {
            let e = graphs(extra).unwrap_err().to_string();
            assert!(e.contains(needle), "{extra}: {e}");
        }
    }

    #[test]
    fn muon_is_read_with_its_zero_stage_and_refused_beside_what_it_runs_without() {
        use crate::cost::step::recipe::Optimizer;
        let f = parse(&script("  --optimizer muon", "")).unwrap();
        assert_eq!(
            (f.optimizer, f.zero.map(|z| z.get())),
            (Some(Optimizer::Muon), Some(0))
        );
        let f = parse(&script("  --optimizer dist_muon", "")).unwrap();
        assert_eq!(
            (f.optimizer, f.zero.map(|z| z.get())),
            (Some(Optimizer::Muon), Some(1))
        );
        for (extra, option) in [
            (
                "  --optimizer dist_muon --use-distributed-optimizer",
                "--optimizer = dist_muon",
            ),
            (
                "  --optimizer muon --use-precision-aware-optimizer",
                "--use-precision-aware-optimizer",
            ),
        ] {
            let e = parse(&script(extra, "")).unwrap_err().to_string();
            assert!(e.contains(option), "{e}");
        }
    }

    #[test]
    fn an_optimizer_other_than_adam_is_refused_not_read_as_adam() {
        assert!(parse(&script("  --optimizer adam", "")).is_ok());
        for other in ["sgd", "adagrad"] {
            let e = parse(&script(&format!("  --optimizer {other}"), ""))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("--optimizer = {other}")), "{e}");
        }
    }

    #[test]
    fn a_launch_script_s_array_and_torchrun_s_counts_are_read() {
        let script = "#!/bin/bash\nARGS=(\n  --num-layers 2 --hidden-size 256 --ffn-hidden-size 512\n  --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope\n  --seq-length 128 --micro-batch-size 1 --train-iters 10\n)\ntorchrun --nproc_per_node=8 --nnodes 2 pretrain_gpt.py \"${ARGS[@]}\" \\\n  --global-batch-size 16\n";
        let f = parse(script).unwrap();
        assert_eq!(f.gpus, Some(16));
        assert_eq!(f.tokens, Some(10 * 16 * 128));
        // The launcher's options in an array of their own, a count in a variable.
        let script = script.replace(
            "torchrun --nproc_per_node=8 --nnodes 2",
            "N=4\nDIST=(--nproc_per_node $N --nnodes 2)\ntorchrun \"${DIST[@]}\"",
        );
        let f = parse(&script).unwrap();
        assert_eq!(f.gpus, Some(8));
    }

    /// A small model's arguments, as an array, with `extra` among them and `after` below.
    fn script(extra: &str, after: &str) -> String {
        format!("ARGS=(\n  --num-layers 2 --hidden-size 256 --ffn-hidden-size 512\n  --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope\n  --seq-length 128 --micro-batch-size 1 --global-batch-size 16 --train-iters 10\n{extra}\n)\n{after}\n")
    }

    fn refusal(text: &str) -> String {
        let e = parse(text).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn a_window_on_some_layers_reads_in_megatron_s_two_forms() {
        // `--window-attn-skip-freq N`: every layer windowed but each N-th (1-indexed), so 2 is
        // every second from the first; a list names them; a window everywhere is no set.
        let dims = |extra: &str| match parse(&script(extra, "")).unwrap().model {
            FileModel::Dims(d) => d,
            _ => panic!("no dimensions read"),
        };
        // The script's two layers: the first windowed, the second full.
        let windowed = |extra: &str| {
            dims(extra)
                .window_layers
                .map(|set| set.indices(2).collect::<Vec<u32>>())
        };
        let d = dims("  --window-size 127,0 --window-attn-skip-freq 2");
        assert_eq!(d.sliding_window, Some(128));
        assert_eq!(
            windowed("  --window-size 127,0 --window-attn-skip-freq 2"),
            Some(vec![0])
        );
        assert_eq!(
            windowed("  --window-size 127,0 --window-attn-skip-freq \"[1,0]\""),
            Some(vec![0])
        );
        assert_eq!(
            windowed("  --window-size 127,0 --window-attn-skip-freq \"[1,1]\""),
            None
        );
        // A list repeated, as Megatron-LM evaluates it.
        assert_eq!(
            windowed("  --window-size 127,0 --window-attn-skip-freq \"[1,0]*1\""),
            Some(vec![0])
        );
        // Without a window Megatron-core ignores it.
        assert_eq!(windowed("  --window-attn-skip-freq 2"), None);
        let e = refusal(&script(
            "  --window-size 127,0 --window-attn-skip-freq \"[1,0,1]\"",
            "",
        ));
        assert!(
            e.contains("--window-attn-skip-freq = [1,0,1]: a list of 2 flags"),
            "{e}"
        );
    }

    #[test]
    fn megatron_lm_s_fp4_options_read_as_nvfp4_and_the_export_s_read_back() {
        let nvfp4 = |extra: &str| parse(&script(extra, "")).map(|f| f.precision);
        assert_eq!(
            nvfp4("--fp4-format e2m1 --fp4-recipe nvfp4").unwrap(),
            Some(Precision::Nvfp4)
        );
        assert_eq!(nvfp4("--fp4-format e2m1").unwrap(), Some(Precision::Nvfp4));
        let exported: Vec<String> =
            crate::report::export::megatron::fp8_arguments(Precision::Nvfp4, None)
                .iter()
                .map(|(o, v)| format!("{o} {v}"))
                .collect();
        assert_eq!(nvfp4(&exported.join(" ")).unwrap(), Some(Precision::Nvfp4));
        let e = refusal(&script(
            "--fp4-format e2m1 --fp8-format hybrid --fp8-recipe delayed",
            "",
        ));
        assert!(
            e.starts_with("invalid --fp4-format/--fp4-recipe = e2m1/none"),
            "{e}"
        );
    }

    #[test]
    fn transformer_engine_s_cross_entropy_is_read_only_under_the_loss_fusion() {
        let loss = |extra: &str| parse(&script(extra, "")).unwrap().loss;
        let te = "--cross-entropy-fusion-impl te";
        assert_eq!(loss(""), None);
        assert_eq!(
            loss(&format!("--cross-entropy-loss-fusion {te}")),
            Some(LossPrecision::InPlace)
        );
        // Without the fusion Megatron-core runs its own loss, whatever the implementation.
        assert_eq!(loss(te), Some(LossPrecision::Fp32));
        assert_eq!(
            loss("--cross-entropy-loss-fusion --cross-entropy-fusion-impl native"),
            Some(LossPrecision::Fp32)
        );
        let e = refusal(&script("--cross-entropy-fusion-impl triton", ""));
        assert!(
            e.starts_with("line 5: invalid --cross-entropy-fusion-impl = triton: native or te"),
            "{e}"
        );
    }

    #[test]
    fn a_node_count_the_reader_cannot_read_is_refused_not_taken_for_one_node() {
        let launch = |nodes: &str| {
            script(
                "",
                &format!("torchrun --nproc_per_node 8 {nodes} pretrain_gpt.py \"${{ARGS[@]}}\""),
            )
        };
        assert_eq!(parse(&launch("")).unwrap().gpus, Some(8));
        assert_eq!(parse(&launch("--nnodes 4")).unwrap().gpus, Some(32));
        // `--nnodes=$N` is read as `--nnodes $N` is.
        assert_eq!(
            parse(&format!("N=4\n{}", launch("--nnodes=$N")))
                .unwrap()
                .gpus,
            Some(32)
        );
        for (nodes, named) in [
            ("--nnodes 0", "--nnodes = 0"),
            ("--nnodes 2:4", "--nnodes = 2:4"),
            ("--nnodes $NODES", "--nnodes = no value"),
            ("--nnodes=$NODES", "--nnodes = :"),
            (
                "--nnodes $(scontrol show hostnames | wc -l)",
                "--nnodes = $(scontrol",
            ),
            ("--num_nodes x", "--num_nodes = x"),
        ] {
            let e = refusal(&launch(nodes));
            assert!(e.contains(named) && e.contains("nodes ≥ 1"), "{nodes}: {e}");
        }
    }

    #[test]
    fn what_megatron_lm_decides_for_a_script_is_read_as_it_decides() {
        // Sequence parallelism at TP 1 is turned off (arguments.py), said in a note.
        let f = parse(&script("  --sequence-parallel", "")).unwrap();
        assert_eq!(f.sequence_parallel, Some(false));
        assert!(f
            .notes
            .iter()
            .any(|n| n.contains("--sequence-parallel at TP 1 is off")));
        // `--fp8-format hybrid` alone runs TransformerConfig's default recipe, delayed.
        let f = parse(&script("  --fp8-format hybrid", "")).unwrap();
        let g = parse(&script("  --fp8-format hybrid --fp8-recipe delayed", "")).unwrap();
        assert_eq!((f.precision, f.fp8_recipe), (g.precision, g.fp8_recipe));
        assert_eq!(f.precision, Some(Precision::Fp8));
        // NVIDIA's Llama 3 8B FP8 example's options that change neither memory nor time.
        let f = parse(&script(
            "  --apply-layernorm-1p --decoupled-lr 5.0e-4 --decoupled-min-lr 4.5e-5\n  \
             --tiktoken-pattern v2 --no-create-attention-mask-in-dataloader --no-mmap-bin-files",
            "",
        ))
        .unwrap();
        for option in [
            "--apply-layernorm-1p",
            "--decoupled-lr 5.0e-4",
            "--no-mmap-bin-files",
        ] {
            assert!(
                f.unused.iter().any(|u| u == option),
                "{option}: {:?}",
                f.unused
            );
        }
    }

    #[test]
    fn a_switch_takes_no_value_and_a_value_holds_nothing_unexpanded() {
        let e = refusal(&script("  --sequence-parallel false", ""));
        assert!(
            e.contains("--sequence-parallel = false: no value") && e.contains("switch"),
            "{e}"
        );
        // The next command's words are no value of it.
        let f = parse(&script(
            "  --sequence-parallel --tensor-model-parallel-size 2",
            "echo done",
        ))
        .unwrap();
        assert_eq!(f.sequence_parallel, Some(true));
        // A reference inside a word is put in, as bash puts it in.
        let e = refusal(&format!(
            "TP=4\n{}",
            script("  --tensor-model-parallel-size ${TP}x", "")
        ));
        assert!(
            e.contains("--tensor-model-parallel-size = 4x: a whole number"),
            "{e}"
        );
        // A command's output is not known: the reader runs nothing.
        let e = refusal(&script("  --tensor-model-parallel-size $(echo 2)", ""));
        assert!(
            e.contains("= $(echo 2): a value the script sets: the reader runs no command"),
            "{e}"
        );
        // An unquoted variable of several options is split as bash splits it.
        let f = parse(&format!(
            "PAR=\"--tensor-model-parallel-size 2 --sequence-parallel\"\n{}",
            script("", "torchrun pretrain_gpt.py \"${ARGS[@]}\" $PAR")
        ))
        .unwrap();
        assert_eq!((f.tp, f.sequence_parallel), (Some(2), Some(true)));
        // Quoted, it is no option bash would hand over as one.
        for par in [
            "\"$PAR\"",
            "\"--tensor-model-parallel-size $TP\"",
            "--$(echo x)",
        ] {
            let e = refusal(&format!(
                "PAR=\"--tensor-model-parallel-size 2 --sequence-parallel\"\n{}",
                script("", &format!("torchrun pretrain_gpt.py {par}"))
            ));
            assert!(e.contains("options written out, one a word"), "{e}");
        }
        // An unset one is empty, and said.
        let f = parse(&script(
            "",
            "torchrun pretrain_gpt.py \"${ARGS[@]}\" $EXTRA_ARGS",
        ))
        .unwrap();
        let unset: Vec<&String> = f
            .notes
            .iter()
            .filter(|n| !n.starts_with("--hidden-dropout"))
            .collect();
        assert_eq!(unset.len(), 1);
        assert!(
            unset[0].starts_with("not set in the file, read as empty")
                && unset[0].contains("$EXTRA_ARGS (line 7)"),
            "{:?}",
            f.notes
        );
    }

    #[test]
    fn group_limited_routing_reads_with_both_options_and_is_refused_with_one() {
        let moe =
            "  --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 256 --moe-grouped-gemm\n  --moe-token-dispatcher-type alltoall";
        let experts =
            |extra: &str| match parse(&script(&format!("{moe} {extra}"), "")).unwrap().model {
                FileModel::Dims(d) => d.experts.unwrap(),
                _ => panic!("no dimensions read"),
            };
        let grouped = experts("--moe-router-num-groups 4 --moe-router-group-topk 2");
        assert_eq!(
            grouped.groups,
            Some(crate::model::Groups {
                count: 4,
                per_token: 2
            })
        );
        assert_eq!(experts("").groups, None);
        let e = refusal(&script(&format!("{moe} --moe-router-num-groups 4"), ""));
        assert!(e.contains("with --moe-router-group-topk"), "{e}");
    }

    #[test]
    fn latent_attention_s_up_projection_module_is_read() {
        let mla = "  --multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512\n  --recompute-granularity selective";
        let read = |modules: &str| parse(&script(&format!("{mla} {modules}"), "")).unwrap();
        let f = read("--recompute-modules mla_up_proj core_attn");
        assert_eq!(f.latent_recompute, Some(true));
        assert_eq!(f.recompute, Some(Recompute::Selective));
        // Stated for latent attention, off where the modules leave it out.
        let f = read("--recompute-modules core_attn");
        assert_eq!(f.latent_recompute, Some(false));
        // Without latent attention, only where the file turns it on (the design refuses it).
        let f = parse(&script(
            "  --recompute-granularity selective --recompute-modules mla_up_proj",
            "",
        ))
        .unwrap();
        assert_eq!(f.latent_recompute, Some(true));
        assert_eq!(f.recompute, Some(Recompute::None));
    }

    #[test]
    fn a_mixture_of_experts_and_its_settings_are_read_back() {
        let moe = "  --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 256\n  --moe-layer-freq \"[1,0]\" --expert-model-parallel-size 4 --expert-tensor-parallel-size 1\n  --moe-grouped-gemm --moe-token-dispatcher-type flex --moe-enable-deepep\n  --moe-router-load-balancing-type aux_loss --overlap-moe-expert-parallel-comm\n  --recompute-granularity selective --recompute-modules layernorm moe_act\n  --qk-layernorm";
        let f = parse(&script(moe, "")).unwrap();
        let FileModel::Dims(dims) = &f.model else {
            panic!("{:?}", f.model)
        };
        assert_eq!(
            dims.experts,
            Some(FileExperts {
                routed: 8,
                per_token: 2,
                ffn: 256,
                shared_ffn: 0,
                layers: Some(vec![true, false]),
                groups: None,
                score_bias: false,
            })
        );
        assert!(dims.qk_norm);
        assert_eq!((f.ep, f.etp), (Some(4), Some(1)));
        assert_eq!(f.ep_dispatcher, Some(Dispatcher::DeepEp));
        assert_eq!(f.ep_overlap, Some(true));
        assert_eq!(f.moe_recompute, Some(MoeRecompute::Act));
        assert_eq!(f.norm_recompute, Some(true));
        // Selective granularity without core attention: the step recomputes nothing else.
        assert_eq!(f.recompute, Some(Recompute::None));
        // What the time model does not cost, or an expert option without experts, is named.
        let e = refusal(&script(&moe.replace("--moe-grouped-gemm ", ""), ""));
        assert!(e.contains("--moe-grouped-gemm = missing"), "{e}");
        let e = refusal(&script(
            &moe.replace("flex --moe-enable-deepep", "allgather"),
            "",
        ));
        assert!(e.contains("--moe-token-dispatcher-type = allgather"), "{e}");
        let e = refusal(&script("  --moe-router-topk 2", ""));
        assert!(
            e.contains("--moe-router-topk = given without --num-experts"),
            "{e}"
        );
        let e = refusal(&script(&moe.replace("moe_act", "mlp"), ""));
        assert!(e.contains("--recompute-modules = layernorm mlp"), "{e}");
        let e = refusal(&script(&moe.replace("\"[1,0]\"", "\"[1,0,1]\""), ""));
        assert!(
            e.contains("--moe-layer-freq = [1,0,1]: a list of 2 flags"),
            "{e}"
        );
    }

    #[test]
    fn a_long_script_is_read_whole() {
        // 1 MiB of distinct options and variables, every one read (the quadratic look-ups
        // this once had took 7-9 s in a release build; speed is the benchmarks' to measure,
        // not a timed test's, which fails on a busy machine).
        let mut text = script("", "");
        let mut i = 0;
        while text.len() < (1 << 20) - 64 {
            text.push_str(&format!("V{i}=$V{}\nA{i}=(--data-path-{i} $V{i})\n", i / 2));
            i += 1;
        }
        let f = parse(&text).unwrap();
        assert_eq!(f.unused.len(), i);
    }

    #[test]
    fn layout_strings_count_their_entries() {
        assert_eq!(layout_entries("Et|(t|)*47,(t*2|)*15,t*2L").unwrap(), 64);
        assert_eq!(layout_entries("\"Et|(t*2|)*2,tL\"").unwrap(), 4);
        assert_eq!(layout_entries("E|(t|)*6,L").unwrap(), 8);
        assert!(layout_entries("(t|)*x,").is_err());
    }

    #[test]
    fn an_unknown_option_is_named_and_a_data_option_is_unused() {
        let base = "--num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1 --global-batch-size 8 --train-iters 10";
        let f = parse(&format!("{base} --data-path /x --lr 3e-4")).unwrap();
        assert_eq!(f.unused, ["--data-path /x", "--lr 3e-4"]);
        assert_eq!(f.tokens, Some(10 * 8 * 128));
        let e = parse(&format!("{base} --moe-expert-capacity-factor 1.25"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--moe-expert-capacity-factor = 1.25") && !e.contains('\n'),
            "{e}"
        );
        // FP16 mixed precision: planned as 16-bit, said in a note; both is Megatron's error.
        let f = parse(&format!("{} --fp16", base.replace(" --bf16", ""))).unwrap();
        assert_eq!(f.precision, Some(Precision::Bf16));
        assert!(
            f.notes.iter().any(|n| n.starts_with("--fp16")),
            "{:?}",
            f.notes
        );
        let e = parse(&format!("{base} --fp16")).unwrap_err().to_string();
        assert!(e.contains("--fp16 = given with --bf16"), "{e}");
        // What Megatron-LM builds when the arguments do not say: GPT-2's LayerNorm, GeLU and a
        // learned table of --max-position-embeddings rows.
        let dims = |text: &str| match parse(text).unwrap().model {
            FileModel::Dims(d) => d.style,
            other => panic!("{other:?}"),
        };
        let gpt = base
            .replace("--normalization RMSNorm ", "")
            .replace("--swiglu ", "")
            .replace(
                "--position-embedding-type rope",
                "--max-position-embeddings 128",
            );
        assert_eq!(dims(&gpt), Style::gpt(128));
        assert_eq!(
            dims(&base.replace("RMSNorm", "LayerNorm")).norm,
            Norm::LayerNorm
        );
        let e = parse(&base.replace("--position-embedding-type rope", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--max-position-embeddings = missing"), "{e}");
        let e = parse(&base.replace("RMSNorm", "BatchNorm"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("RMSNorm or LayerNorm"), "{e}");
        // A ramp-up Megatron-LM ignores is read and not used; several problems at once.
        let e = parse(&format!(
            "A=({base}\n --moe-expert-capacity-factor 1.25\n --rampup-batch-size 16 16 100\n --no-such-option 1)"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("2 lines, every problem at once"), "{e}");
        assert!(
            e.contains("line 2: invalid --moe-expert-capacity-factor"),
            "{e}"
        );
        assert!(e.contains("line 4: invalid --no-such-option = 1"), "{e}");
        let f = parse(&format!("{base} --rampup-batch-size 16 16 100")).unwrap();
        assert_eq!(f.unused, ["--rampup-batch-size 16 16 100"]);
        assert!(f.notes[0].contains("ignores it"), "{:?}", f.notes);
    }

    #[test]
    fn megatron_deepspeed_s_engine_and_spellings_are_read() {
        let ds = "  --deepspeed --zero-stage=2 --deepspeed_config=ds.json --num-key-value-heads 1\n  --use-rotary-position-embeddings";
        let text = script(ds, "").replace(
            "--normalization RMSNorm --position-embedding-type rope",
            "--normalization rmsnorm",
        );
        let f = parse(&text).unwrap();
        assert_eq!(f.zero, Some(ZeroStage::new(2).unwrap()));
        assert_eq!(
            f.stack,
            Some(crate::cost::step::stack::Stack::MegatronDeepspeed)
        );
        let FileModel::Dims(dims) = &f.model else {
            panic!("dimensions")
        };
        assert_eq!(dims.kv_heads, 1);
        assert!(f.unused.iter().any(|u| u == "--deepspeed_config ds.json"));
        // The stage without the engine, or beside Megatron-LM's own sharding, is refused.
        let e = refusal(&script("  --zero-stage 1", ""));
        assert!(e.contains("--zero-stage = 1: with --deepspeed"), "{e}");
        let e = refusal(&script(
            "  --deepspeed --zero-stage 1 --use-distributed-optimizer",
            "",
        ));
        assert!(
            e.contains("without Megatron-LM's distributed optimizer"),
            "{e}"
        );
    }

    /// Every option Megatron-LM registers (at the pin of `megatron-arguments.txt`) is mapped,
    /// read and not used, or refused by name with what the plan would need: none is unknown.
    #[test]
    fn every_option_megatron_lm_registers_is_classified() {
        let base = script("", "");
        let unknown = "an option trainplan maps to the design or knows to leave the plan alone";
        let listed: Vec<&str> =
            include_str!("../../../tests/fixtures/launchers/megatron-arguments.txt")
                .lines()
                .filter(|l| l.starts_with("--"))
                .collect();
        assert!(listed.len() > 800, "{}", listed.len());
        let mut unclassified = Vec::new();
        for option in listed {
            // As a switch and with a value: one of them reads, or is refused by name.
            let known = ["", " 1"].iter().any(|value| {
                let text = base.replace("\n)", &format!("\n  {option}{value}\n)"));
                match parse(&text) {
                    Ok(_) => true,
                    Err(e) => !e.to_string().contains(unknown),
                }
            });
            if !known {
                unclassified.push(option);
            }
        }
        assert!(unclassified.is_empty(), "unclassified: {unclassified:?}");
    }

    #[test]
    fn a_window_of_the_largest_left_is_refused_not_wrapped_to_nothing() {
        let f = parse(&script("  --window-size 4095,0", "")).unwrap();
        let FileModel::Dims(dims) = f.model else {
            panic!("dimensions")
        };
        assert_eq!(dims.sliding_window, Some(4096));
        let e = refusal(&script("  --window-size 18446744073709551615,0", ""));
        assert!(
            e.starts_with("line 5: invalid --window-size = 18446744073709551615,0"),
            "{e}"
        );
    }
}

/// Megatron-LM's gradient-reduction and optimizer-state options, read together.
#[derive(Debug, Default)]
struct OptimizerBuilder {
    /// `--grad-reduce-in-bf16`.
    grads_bf16: bool,
    /// `--accumulate-allreduce-grads-in-fp32` (Megatron-LM's default with `--bf16`).
    grads_fp32: bool,
    /// `--main-grads-dtype`.
    main_grads: Option<String>,
    /// `--use-precision-aware-optimizer`.
    aware: bool,
    /// `--no-store-param-remainders` (Megatron-LM after commit 000c4ac; before it an FP32
    /// master beside BF16 weights is always stored as remainders).
    no_remainders: bool,
    /// `--main-params-dtype`.
    main_params: Option<String>,
    /// `--exp-avg-dtype`.
    exp_avg: Option<String>,
    /// `--exp-avg-sq-dtype`.
    exp_avg_sq: Option<String>,
    /// `--optimizer-cpu-offload`.
    cpu_offload: bool,
    /// `--optimizer-offload-fraction` (Megatron-LM's default 1.0).
    offload_fraction: Option<f64>,
    /// `--overlap-cpu-optimizer-d2h-h2d`.
    overlap_cpu: bool,
}

impl OptimizerBuilder {
    /// The gradients' precision and the optimizer state's into `from`, or the option that says
    /// what the model cannot: gradients in FP32 and BF16 at once, the dtypes without the
    /// precision-aware optimizer (Megatron-LM uses them only with it), moments other than FP32
    /// or BF16 or in two precisions. Under the precision-aware optimizer Megatron-core keeps
    /// an FP32 master as remainders beside BF16 weights unless told not to
    /// (`--no-store-param-remainders`) or the weights are FP8 (`--fp8-param-gather`).
    fn apply(self, from: &mut FromFile, fp8_params: bool, fp16: bool) -> Result<()> {
        let bf16_grads = match self.main_grads.as_deref() {
            // Megatron-LM accumulates and reduces in FP32 by default only under --bf16
            // (arguments.py): under --fp16 the gradient buffers are 16-bit unless told.
            None if fp16 => !self.grads_fp32,
            None | Some("fp32") => self.grads_bf16,
            Some("bf16") => true,
            Some(other) => {
                return Err(Error::invalid(
                    "--main-grads-dtype",
                    other,
                    "fp32 or bf16, the gradient buffers the model counts",
                ))
            }
        };
        if bf16_grads && self.grads_fp32 {
            return Err(Error::invalid(
                "--accumulate-allreduce-grads-in-fp32",
                "given",
                "left out with --grad-reduce-in-bf16 or --main-grads-dtype bf16 (the gradients are one or the other)",
            ));
        }
        from.gradients = Some(if bf16_grads {
            GradientPrecision::Bf16
        } else {
            GradientPrecision::Fp32
        });
        from.optimizer_states = Some(OptimizerStates::Fp32);
        from.master_weights = Some(MasterWeights::Fp32);
        from.offload_optimizer = Some(0.0);
        if self.cpu_offload {
            return self.offloaded(from);
        }
        let dtypes = [
            ("--main-params-dtype", &self.main_params),
            ("--exp-avg-dtype", &self.exp_avg),
            ("--exp-avg-sq-dtype", &self.exp_avg_sq),
        ];
        if !self.aware {
            if let Some((option, Some(v))) = dtypes.iter().find(|(_, v)| v.is_some()) {
                return Err(Error::invalid(
                    *option,
                    v,
                    "given with --use-precision-aware-optimizer, which Megatron-LM's optimizer dtypes need",
                ));
            }
            if self.no_remainders {
                return Err(Error::invalid(
                    "--no-store-param-remainders",
                    "given",
                    "given with --use-precision-aware-optimizer, whose remainders it turns off",
                ));
            }
            return Ok(());
        }
        let moment = |option: &str, v: &Option<String>| match v.as_deref() {
            None | Some("fp32") => Ok(OptimizerStates::Fp32),
            Some("bf16") => Ok(OptimizerStates::Bf16),
            Some(other) => Err(Error::invalid(
                option,
                other,
                "fp32 or bf16, the moments the model counts",
            )),
        };
        let (m, v) = (
            moment("--exp-avg-dtype", &self.exp_avg)?,
            moment("--exp-avg-sq-dtype", &self.exp_avg_sq)?,
        );
        if m != v {
            return Err(Error::invalid(
                "--exp-avg-sq-dtype",
                v.name(),
                format!(
                    "{}, as --exp-avg-dtype: both moments in one precision",
                    m.name()
                ),
            ));
        }
        let master = match self.main_params.as_deref() {
            Some("fp16") => MasterWeights::Fp16,
            None | Some("fp32") if self.no_remainders || fp8_params => MasterWeights::Fp32,
            None | Some("fp32") => MasterWeights::Remainders,
            Some(other) => {
                return Err(Error::invalid(
                    "--main-params-dtype",
                    other,
                    "fp32 or fp16, the master weights the model counts",
                ))
            }
        };
        from.optimizer_states = Some(m);
        from.master_weights = Some(master);
        Ok(())
    }
}

impl OptimizerBuilder {
    /// Megatron-core's hybrid optimizer (`--optimizer-cpu-offload`) into `from`: FP32 master
    /// and moments whatever the precision-aware optimizer's dtypes say (it passes them no
    /// dtype: [`crate::cost::step::optimizer_offload`]), the fraction (default 1.0), or the
    /// option it lacks: `--use-precision-aware-optimizer` (arguments.py asserts it) and
    /// `--overlap-cpu-optimizer-d2h-h2d` (the plan is timed with the copies pipelined).
    fn offloaded(self, from: &mut FromFile) -> Result<()> {
        if !self.aware {
            return Err(Error::invalid(
                "--optimizer-cpu-offload",
                "given",
                "given with --use-precision-aware-optimizer (Megatron-LM's arguments.py asserts it)",
            ));
        }
        if !self.overlap_cpu {
            return Err(Error::invalid(
                "--optimizer-cpu-offload",
                "given",
                "given with --overlap-cpu-optimizer-d2h-h2d: trainplan times the copies and CPU steps pipelined, as Megatron-core's guide recommends",
            ));
        }
        let f = self.offload_fraction.unwrap_or(1.0);
        if !(f.is_finite() && (0.0..=1.0).contains(&f)) {
            return Err(Error::invalid(
                "--optimizer-offload-fraction",
                crate::format::exact(f),
                "a fraction from 0 to 1",
            ));
        }
        from.offload_optimizer = Some(f);
        Ok(())
    }
}

/// A count of layers (0 or more, below 2^32) for `option`.
fn count(option: &str, text: &str) -> Result<u32> {
    text.trim()
        .parse::<u32>()
        .map_err(|_| Error::invalid(option, text, "a whole number of layers ≥ 0"))
}
