//! A torchtitan 0.3 job read back: the command line `python -m torchtitan.train --module llama3
//! --config llama3_8b [--section.key value …]` (or `torchrun … -m torchtitan.train …`, as
//! torchtitan's `run_train.sh` writes it), in a script or alone.
//!
//! torchtitan 0.3 replaced 0.2.2's job TOML ([`super::torchtitan`]) with Python functions that
//! return a whole `Trainer.Config` (`torchtitan/models/<module>/config_registry.py`), named by
//! `--module` and `--config`, and `--section.key` overrides parsed by tyro against that
//! config (`torchtitan/config/manager.py`, `ConfigManager.parse_args`). The functions are
//! Python, which trainplan never runs: the llama3 registry's are tabulated here from the
//! source ([`NAMED`]; `tests/fixtures/launchers/extract_torchtitan03.py configs` lists what
//! they set), and the overrides are checked against the options torchtitan 0.3.0 freezes
//! (`data/launchers/torchtitan-0.3.0-options.txt`). Both become the tables 0.2.2's job file
//! had, read by the same rules ([`super::torchtitan::from_table`]).
//!
//! tyro's spellings: `--a.b v` and `--a.b=v`, `-` and `_` alike in a name, a switch `--a.b`
//! (on) or `--a.no-b` (off), a list as the words after its option, and activation
//! checkpointing as a subcommand word, `activation-checkpoint:{selective,full,memory-budget,
//! none}` (`torchtitan/distributed/activation_checkpoint.py`). In 0.3 `selective` is per-op
//! (every other matrix product's output kept: trainplan's `selective-op`); the per-layer
//! option of 0.2.2 is gone.

use std::collections::BTreeSet;

use toml::{Table, Value};

use crate::cost::step::precision::Precision;
use crate::error::{Error, Result};

use super::design::{Dims, FileModel, FromFile};
use super::megatron::{self, report};
use super::shell::{self, Arg};

/// The options torchtitan 0.3.0's command line takes (its frozen list), with their header.
const OPTIONS: &str = include_str!("../../../data/launchers/torchtitan-0.3.0-options.txt");

/// The activation-checkpoint subcommands, as tyro names them.
const AC_SUBCOMMANDS: [&str; 4] = ["selective", "full", "memory-budget", "none"];

/// Whether `text` is a torchtitan 0.3 job: it runs `torchtitan.train` (`-m torchtitan.train`
/// or the file `torchtitan/train.py`), or it is the command line alone (`--module …`).
pub fn is_job(text: &str) -> bool {
    let trimmed = text.trim_start();
    // A comment that names it is not a command that runs it.
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .any(|l| l.contains("torchtitan.train") || l.contains("torchtitan/train.py"))
        || (trimmed.starts_with("--module") && text.contains("--config"))
}

/// Activation checkpointing as a 0.3 config holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ac {
    Selective,
    Full,
    None,
}

/// One named config of torchtitan 0.3.0's llama3 registry
/// (`torchtitan/models/llama3/config_registry.py`), as its function sets it; what it leaves
/// is `Trainer.Config`'s default (`configs.py`: local batch 8, sequence 2,048, 10,000 steps,
/// `SelectiveAC`, no compile, every degree 1 but the shard degree, −1).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Named {
    name: &'static str,
    /// `model_registry`'s flavor: `8B`, `70B`, `405B` (Llama 3.1's), `debugmodel`.
    flavor: &'static str,
    local_batch: u64,
    seq_len: u64,
    steps: u64,
    tp: u64,
    /// The pipeline schedule it names (used only with a pipeline).
    schedule: Option<&'static str>,
    ac: Ac,
    compile: bool,
    /// The converters' precision (`Float8LinearConverter`, `MXFP8LinearConverter`,
    /// `NVFP4LinearConverter`).
    precision: Precision,
    /// How the config differs from what trainplan grades, said beside the grade.
    note: Option<&'static str>,
    /// Why trainplan cannot plan it as written.
    refused: Option<&'static str>,
}

const fn named(name: &'static str, flavor: &'static str) -> Named {
    Named {
        name,
        flavor,
        local_batch: 8,
        seq_len: 2048,
        steps: 10_000,
        tp: 1,
        schedule: None,
        ac: Ac::Selective,
        compile: false,
        precision: Precision::Bf16,
        note: None,
        refused: None,
    }
}

/// `llama3_debugmodel`: 8 × 2,048 tokens a rank, 10 steps, Interleaved1F1B named for a pipeline.
const DEBUG: Named = Named {
    local_batch: 8,
    seq_len: 2048,
    steps: 10,
    schedule: Some("Interleaved1F1B"),
    ..named("llama3_debugmodel", "debugmodel")
};

/// `llama3_8b`: one 8,192-token sequence a rank, 1,000 steps, selective checkpointing.
const L8B: Named = Named {
    local_batch: 1,
    seq_len: 8192,
    steps: 1000,
    ..named("llama3_8b", "8B")
};

/// torchao's float8 with rowwise scaling, the recipe `Float8LinearConverter` defaults to in 0.3.
const ROWWISE: &str = "float8 with rowwise scaling (torchtitan 0.3's Float8LinearConverter default, torchao's `rowwise`): trainplan's FP8 is per-tensor scaling, whose GEMMs run faster";

/// torchtitan 0.3.0's llama3 named configs ([`Named`]).
const NAMED: [Named; 14] = [
    DEBUG,
    Named {
        name: "llama3_debugmodel_varlen_attn",
        refused: Some("variable-length attention over packed documents (attn_backend varlen): trainplan costs causal attention over the whole sequence"),
        ..DEBUG
    },
    Named {
        name: "llama3_debugmodel_dist_gemm",
        refused: Some("attention's TP collectives folded into its GEMMs (tp_gemm_backend dist_gemm): not a stack trainplan grades"),
        ..DEBUG
    },
    Named {
        name: "llama3_debugmodel_float8",
        precision: Precision::Fp8,
        refused: Some(ROWWISE),
        ..DEBUG
    },
    Named {
        name: "llama3_debugmodel_nvfp4",
        precision: Precision::Nvfp4,
        ..DEBUG
    },
    Named {
        name: "llama3_debugmodel_first_85_pct_layers_nvfp4",
        precision: Precision::Nvfp4,
        refused: Some("NVFP4 on the first 85 % of the layers and BF16 on the rest: trainplan's precision is one for every layer"),
        ..DEBUG
    },
    Named {
        name: "llama3_debugmodel_float8_emulate_lora",
        refused: Some("LoRA adapters on emulated float8 weights: trainplan plans full training"),
        ..DEBUG
    },
    Named {
        name: "llama3_debugmodel_ce_loss",
        ..DEBUG
    },
    L8B,
    Named {
        name: "llama3_8b_first_85_pct_layers_nvfp4",
        compile: true,
        precision: Precision::Nvfp4,
        refused: Some("NVFP4 on the first 85 % of the layers and BF16 on the rest: trainplan's precision is one for every layer"),
        ..L8B
    },
    Named {
        name: "llama3_8b_mxfp8",
        compile: true,
        precision: Precision::Mxfp8,
        note: Some("llama3_8b_mxfp8 converts every Linear to MXFP8, the output layer too; trainplan's MXFP8 keeps the output layer in BF16 (a 128,256 × 4,096 product, about 6 % of the 8B's matrix FLOPs)"),
        ..L8B
    },
    Named {
        local_batch: 8,
        seq_len: 8192,
        steps: 1000,
        tp: 8,
        ac: Ac::Full,
        ..named("llama3_70b", "70B")
    },
    Named {
        local_batch: 2,
        seq_len: 8192,
        steps: 3000,
        tp: 8,
        ac: Ac::Full,
        compile: true,
        precision: Precision::Fp8,
        refused: Some(ROWWISE),
        ..named("llama3_405b", "405B")
    },
    Named {
        name: "sft_debugmodel",
        schedule: None,
        ..DEBUG
    },
];

/// The models (`--module`) torchtitan 0.3.0 registers beside llama3, whose configs trainplan
/// does not tabulate.
const OTHER_MODULES: [&str; 8] = [
    "deepseek_v3",
    "flux",
    "gpt_oss",
    "kimi_k2_7",
    "muse_glimmer",
    "qwen3",
    "qwen3_5",
    "torchtitan_recipes",
];

/// The frozen options, without the header.
fn options() -> BTreeSet<&'static str> {
    OPTIONS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// A word of the command after the program, read as tyro reads it.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    /// `--section.key` (normalised to `_`), its word, or for a switch written without one
    /// whether it is on (`--a.b`) or off (`--a.no-b`), and its line.
    Opt {
        key: String,
        value: Option<String>,
        switch: Option<bool>,
        line: usize,
    },
    /// `activation-checkpoint:NAME`.
    Ac { name: String, line: usize },
}

/// The `section.key` a written option names: `-` read as `_`, and `no_` before the last part
/// of a switch turned off (`--compile.no-enable`) read as the switch, off.
fn key_of(written: &str, known: &BTreeSet<&str>) -> (String, Option<&'static str>) {
    let key = written.replace('-', "_");
    if known.contains(key.as_str()) {
        return (key, None);
    }
    if let Some((section, last)) = key.rsplit_once('.') {
        if let Some(on) = last.strip_prefix("no_") {
            let switch = format!("{section}.{on}");
            if known.contains(switch.as_str()) {
                return (switch, Some("false"));
            }
        }
    } else if let Some(on) = key.strip_prefix("no_") {
        if known.contains(on) {
            return (on.to_string(), Some("false"));
        }
    }
    (key, None)
}

/// The program's words (after `-m torchtitan.train` or `torchtitan/train.py`, or every word
/// of a command line given alone), and the launcher's words before them.
fn program(args: &[Arg]) -> Option<(Vec<&Arg>, Vec<Arg>)> {
    let start = args.iter().enumerate().find_map(|(k, a)| {
        let module = a.text == "torchtitan.train"
            && k > 0
            && args[k - 1].text == "-m"
            && args[k - 1].group == a.group;
        (module || a.text.ends_with("torchtitan/train.py")).then_some(k)
    });
    match start {
        Some(k) => {
            let group = args[k].group;
            // A second command that runs it: the job is not one.
            if args[k + 1..].iter().any(|a| {
                a.group != group
                    && (a.text == "torchtitan.train" || a.text.ends_with("torchtitan/train.py"))
            }) {
                return None;
            }
            let words = args[k + 1..]
                .iter()
                .take_while(|a| a.group == group)
                .collect();
            // The launcher: the other commands' words and those before the program.
            let launcher = args
                .iter()
                .enumerate()
                .filter(|(i, a)| a.group != group || *i < k)
                .map(|(_, a)| a.clone())
                .collect();
            Some((words, launcher))
        }
        None => {
            let first = args.iter().position(|a| a.text.starts_with("--module"))?;
            let group = args[first].group;
            Some((
                args[first..]
                    .iter()
                    .take_while(|a| a.group == group)
                    .collect(),
                Vec::new(),
            ))
        }
    }
}

/// A name given to `--module` or `--config`, with its line.
type NameAt = (String, usize);

/// The activation-checkpoint subcommands whose config holds `option`
/// (`torchtitan/distributed/activation_checkpoint.py`: every policy's `preserve_rng_state`,
/// `determinism_check` and `debug`; `SelectiveAC`'s `force_recompute_mm_shapes_by_fqns`;
/// `MemoryBudgetAC`'s `memory_budget` and `visualize_memory_budget_pareto`).
fn ac_option_owners(option: &str) -> &'static [&'static str] {
    match option {
        "force_recompute_mm_shapes_by_fqns" => &["selective"],
        "memory_budget" | "visualize_memory_budget_pareto" => &["memory-budget"],
        _ => &["selective", "full", "memory-budget"],
    }
}

/// The program's words as tyro reads them; `--module` and `--config` apart.
fn items(
    words: &[&Arg],
    known: &BTreeSet<&str>,
    problems: &mut Vec<(usize, Error)>,
) -> (Vec<Item>, Option<NameAt>, Option<NameAt>) {
    let (mut module, mut config) = (None, None);
    let mut items = Vec::new();
    let subcommand = |w: &str| {
        let w = w.replace('_', "-");
        w.strip_prefix("activation-checkpoint:").map(str::to_string)
    };
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        i += 1;
        if !w.known {
            problems.push((
                w.line,
                Error::invalid(
                    "torchtitan arguments",
                    w.text.escape_debug(),
                    "words the script sets: the reader runs no command ($(…), backquotes) (give the variable with --set NAME=VALUE, or write the value out)",
                ),
            ));
            continue;
        }
        if let Some(name) = subcommand(&w.text) {
            if let Some(Item::Ac { name: first, .. }) =
                items.iter().find(|it| matches!(it, Item::Ac { .. }))
            {
                problems.push((
                    w.line,
                    Error::invalid(
                        "activation-checkpoint",
                        format!("{first} and then {name}"),
                        "one subcommand word (tyro takes one)",
                    ),
                ));
                continue;
            }
            items.push(Item::Ac { name, line: w.line });
            continue;
        }
        let Some(written) = w.text.strip_prefix("--") else {
            problems.push((
                w.line,
                Error::invalid(
                    "torchtitan arguments",
                    w.text.escape_debug(),
                    "an option --section.key, its value, or activation-checkpoint:NAME (a word torchtitan's parser would refuse)",
                ),
            ));
            continue;
        };
        let (name, inline) = match written.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (written, None),
        };
        // tyro takes one word a value (a list's items joined by commas) and none after a
        // switch; every option after the subcommand word is the subcommand's.
        let value = inline.or_else(|| {
            let next = words.get(i)?;
            if next.text.starts_with("--") || subcommand(&next.text).is_some() {
                return None;
            }
            i += 1;
            Some(next.text.clone())
        });
        if let (Some(Item::Ac { name: sub, .. }), false) = (
            items.iter().rev().find(|it| matches!(it, Item::Ac { .. })),
            name == "module"
                || name == "config"
                || name.replace('-', "_").starts_with("activation_checkpoint."),
        ) {
            problems.push((
                w.line,
                Error::invalid(
                    format!("--{name}"),
                    format!("after activation-checkpoint:{sub}"),
                    "the job's options before the subcommand word: tyro reads every option after it as the subcommand's, and refuses this one",
                ),
            ));
            continue;
        }
        match name {
            "module" | "config" => {
                let Some(v) = value else {
                    problems.push((
                        w.line,
                        Error::invalid(format!("--{name}"), "no value", "a name"),
                    ));
                    continue;
                };
                let slot = if name == "module" {
                    &mut module
                } else {
                    &mut config
                };
                // ConfigManager keeps the last given.
                *slot = Some((v, w.line));
            }
            _ => {
                let (key, off) = key_of(name, known);
                if !known.contains(key.as_str()) {
                    problems.push((
                        w.line,
                        Error::invalid(
                            format!("--{name}"),
                            value.as_deref().unwrap_or("given").escape_debug(),
                            "an option of torchtitan 0.3.0's command line (data/launchers/torchtitan-0.3.0-options.txt: torchtitan froze them; a config function sets the rest)",
                        ),
                    ));
                    continue;
                }
                if let Some(option) = key.strip_prefix("activation_checkpoint.") {
                    let sub = items.iter().find_map(|it| match it {
                        Item::Ac { name, .. } => Some(name.as_str()),
                        _ => None,
                    });
                    let owners = ac_option_owners(option);
                    if !sub.is_some_and(|s| owners.contains(&s)) {
                        problems.push((
                            w.line,
                            Error::invalid(
                                format!("--{name}"),
                                sub.map_or("before activation-checkpoint:NAME".to_string(), |s| {
                                    format!("after activation-checkpoint:{s}")
                                }),
                                format!(
                                    "after activation-checkpoint:{} (tyro takes it there only)",
                                    owners.join(" or :")
                                ),
                            ),
                        ));
                        continue;
                    }
                }
                let switch = match (off, &value) {
                    (Some(_), Some(v)) => {
                        problems.push((
                            w.line,
                            Error::invalid(
                                format!("--{name}"),
                                v.escape_debug(),
                                "no value: a switch turned off",
                            ),
                        ));
                        continue;
                    }
                    (Some(_), None) => Some(false),
                    (None, None) => Some(true),
                    (None, Some(_)) => None,
                };
                items.push(Item::Opt {
                    key,
                    value,
                    switch,
                    line: w.line,
                });
            }
        }
    }
    (items, module, config)
}

/// How an override's value goes into the tables: a whole number (−1 too), a word, a switch,
/// a list.
#[derive(Clone, Copy)]
enum Kind {
    Int,
    Str,
    Bool,
    List,
}

/// The keys 0.2.2's tables hold, read by [`super::torchtitan::from_table`], with their kinds.
const TABLED: [(&str, Kind); 21] = [
    ("training.local_batch_size", Kind::Int),
    ("training.global_batch_size", Kind::Int),
    ("training.seq_len", Kind::Int),
    ("training.steps", Kind::Int),
    ("training.mixed_precision_param", Kind::Str),
    ("training.mixed_precision_reduce", Kind::Str),
    ("training.max_norm", Kind::Str),
    ("training.gc_freq", Kind::Int),
    ("training.enable_cpu_offload", Kind::Bool),
    ("parallelism.data_parallel_replicate_degree", Kind::Int),
    ("parallelism.data_parallel_shard_degree", Kind::Int),
    ("parallelism.fsdp_reshard_after_forward", Kind::Str),
    ("parallelism.tensor_parallel_degree", Kind::Int),
    ("parallelism.pipeline_parallel_degree", Kind::Int),
    ("parallelism.pipeline_parallel_schedule", Kind::Str),
    ("parallelism.pipeline_parallel_microbatch_size", Kind::Int),
    ("parallelism.pipeline_parallel_layers_per_stage", Kind::Int),
    ("parallelism.context_parallel_degree", Kind::Int),
    ("compile.enable", Kind::Bool),
    ("compile.components", Kind::List),
    ("compile.backend", Kind::Str),
];

/// Options that do not change the plan at the values they may take, by section or key.
const UNUSED: [&str; 27] = [
    "checkpoint.",
    "comm.",
    "dataloader.",
    "debug.",
    "dump_folder",
    "encoder.",
    "hf_assets_path",
    "inference.",
    "loss.",
    "lr_scheduler.",
    "metrics.",
    "override.",
    "profiler.",
    "tokenizer.",
    "validator.",
    "optimizer.implementation",
    "optimizer.optimizer_factory_kwargs_by_name",
    "optimizer.param_groups.optimizer_kwargs",
    "optimizer.param_groups.pattern",
    "training.disable_cuda_graphs",
    "training.gc_debug",
    "parallelism.spmd_backend",
    "parallelism.enable_fsdp_symm_mem",
    "parallelism.context_parallel_load_balancer",
    "parallelism.context_parallel_ptrr_mask_key",
    "activation_checkpoint.",
    // The compiled stack's TP overlap is graded as the stack's own.
    "compile.enable_async_tensor_parallel",
];

/// An override's value as the tables hold it: `value` as written, or a switch's state.
fn value_of(key: &str, kind: Kind, value: Option<&str>, switch: Option<bool>) -> Result<Value> {
    let text = value.unwrap_or("");
    let bad = |expected: &str| {
        Error::invalid(
            format!("--{key}"),
            value.map_or("no value".into(), |v| v.escape_debug().to_string()),
            expected,
        )
    };
    Ok(match (kind, switch) {
        (Kind::Bool, Some(on)) => Value::Boolean(on),
        (Kind::Bool, None) => {
            return Err(bad(
                "no value: a switch, --a.b on and --a.no-b off (tyro refuses a value after it)",
            ))
        }
        (_, Some(_)) => return Err(bad("a value")),
        (Kind::Int, None) => Value::Integer(
            text.trim()
                .parse::<i64>()
                .map_err(|_| bad("a whole number"))?,
        ),
        (Kind::Str, None) => Value::String(text.to_string()),
        // tyro's list: the items in one word, separated by commas.
        (Kind::List, None) => Value::Array(
            text.split(',')
                .map(|w| Value::String(w.to_string()))
                .collect(),
        ),
    })
}

/// Puts `value` at the dotted `key` of `root`.
fn set(root: &mut Table, key: &str, value: Value) {
    let (section, name) = key.split_once('.').unwrap_or(("", key));
    let table = root
        .entry(section.to_string())
        .or_insert_with(|| Value::Table(Table::new()));
    if let Value::Table(t) = table {
        t.insert(name.to_string(), value);
    }
}

/// The dimensions of `model_registry("debugmodel")` (`torchtitan/models/llama3/__init__.py`):
/// 6 layers of 256 with 16 heads, a vocabulary of 2,048, SwiGLU of
/// `compute_ffn_hidden_dim(256, multiple_of=256)` = 256·⌈⌊2·4·256/3⌋/256⌉ = 768, Llama 3.1's
/// RoPE (θ 500,000, scaled).
fn debug_model() -> Dims {
    Dims {
        vocab: Some(2048),
        ..Dims::llama3(6, 256, 768, 16, 16)
    }
}

/// Every problem at once: one line alone, or the report of them all (the design is not whole).
fn every_problem(problems: &[(usize, Error)]) -> Error {
    let lines = report(problems);
    if lines.len() == 1 {
        Error::Problems(lines)
    } else {
        super::design::refusal(
            lines,
            &FromFile::new(super::design::Source::Torchtitan),
            false,
        )
    }
}

/// The design a torchtitan 0.3 job in `text` states, with the user's word on what its script
/// leaves open and the GPUs when given (`--gpus`).
pub fn parse_with(text: &str, given: &shell::Given, gpus: Option<u64>) -> Result<FromFile> {
    let script = shell::read_with(text, given)?;
    let mut problems = megatron::script_problems(&script);
    let Some((words, launcher)) = program(script.args()) else {
        return Err(Error::invalid(
            "--from",
            "no torchtitan command, or several",
            "one command that runs torchtitan.train (python -m torchtitan.train --module llama3 --config …); of a script that runs it twice, decide which with --branch or --set",
        ));
    };
    // Readings of the script that hand torchtitan other words.
    for reading in &script.readings[1..] {
        let theirs: Vec<&str> = program(&reading.args)
            .map(|(w, _)| w.iter().map(|a| a.text.as_str()).collect())
            .unwrap_or_default();
        let ours: Vec<&str> = words.iter().map(|a| a.text.as_str()).collect();
        if theirs != ours {
            let flags: Vec<String> = reading
                .choices
                .iter()
                .map(|c| format!("--branch {}={}", c.line, c.taken))
                .collect();
            problems.push((
                reading.choices.first().map_or(0, |c| c.line),
                Error::invalid(
                    "--from script",
                    format!("{} gives torchtitan other words", flags.join(" ")),
                    "one reading of the script: decide its conditions with --branch or --set",
                ),
            ));
        }
    }
    let known = options();
    let (items, module, config) = items(&words, &known, &mut problems);
    let mut launcher_problems = Vec::new();
    let launcher_options = megatron::options(&launcher, &mut launcher_problems);
    // `--gpus` stands for the launcher's counts, as beside any script.
    let world = match gpus {
        Some(g) => Some(g),
        None => megatron::launcher_gpus(&launcher_options, gpus, &mut problems),
    };
    let mut refused: Vec<(usize, Error)> = Vec::new();
    let module = module.map_or("missing".to_string(), |(m, _)| m);
    if module != "llama3" && module != "torchtitan.models.llama3" {
        let why = if OTHER_MODULES.contains(&module.as_str()) {
            "llama3: trainplan tabulates the llama3 registry's named configs of torchtitan 0.3.0 (for another model, give it with --model-config and the layout with flags)"
        } else {
            "llama3, the module whose named configs trainplan tabulates (torchtitan 0.3.0's --module)"
        };
        problems.push((0, Error::invalid("--module", &module, why)));
    }
    let config_name = config.as_ref().map_or("missing", |(c, _)| c.as_str());
    let named = NAMED.iter().find(|n| n.name == config_name).copied();
    let module_ok = module == "llama3" || module == "torchtitan.models.llama3";
    let Some(named) = named.filter(|_| module_ok) else {
        // Another module's config names are its own: the module's refusal says it.
        if named.is_none() && module_ok {
            let names: Vec<&str> = NAMED.iter().map(|n| n.name).collect();
            problems.push((
                config.as_ref().map_or(0, |(_, l)| *l),
                Error::invalid(
                    "--config",
                    config_name,
                    format!(
                        "a named config of torchtitan 0.3.0's llama3 registry: {}",
                        names.join(", ")
                    ),
                ),
            ));
        }
        return Err(every_problem(&problems));
    };
    if let Some(why) = named.refused {
        refused.push((
            config.as_ref().map_or(0, |(_, l)| *l),
            Error::invalid("--config", named.name, why),
        ));
    }
    // The tables the named config builds, then the command line's overrides.
    let mut root = Table::new();
    set(&mut root, "model.name", Value::String("llama3".into()));
    if named.flavor != "debugmodel" {
        set(
            &mut root,
            "model.flavor",
            Value::String(named.flavor.to_string()),
        );
    }
    let int = |n: u64| Value::Integer(n as i64);
    set(
        &mut root,
        "training.local_batch_size",
        int(named.local_batch),
    );
    set(&mut root, "training.seq_len", int(named.seq_len));
    set(&mut root, "training.steps", int(named.steps));
    set(
        &mut root,
        "parallelism.tensor_parallel_degree",
        int(named.tp),
    );
    if let Some(s) = named.schedule {
        set(
            &mut root,
            "parallelism.pipeline_parallel_schedule",
            Value::String(s.into()),
        );
    }
    set(&mut root, "compile.enable", Value::Boolean(named.compile));
    let mut ac = named.ac;
    let mut from_unused: Vec<String> = Vec::new();
    let mut mapped: Vec<String> = vec![
        format!("--module {module}"),
        format!("--config {}", named.name),
    ];
    let mut schedule_given = false;
    let mut memory_budget = false;
    for item in &items {
        match item {
            Item::Ac { name, line } => {
                ac = match name.as_str() {
                    "selective" => Ac::Selective,
                    "full" => Ac::Full,
                    "none" => Ac::None,
                    "memory-budget" => {
                        memory_budget = true;
                        refused.push((*line, Error::invalid(
                            "activation-checkpoint",
                            "memory-budget",
                            "selective, full or none: the memory-budget policy's choice of what to keep is torch.compile's, which trainplan does not model",
                        )));
                        continue;
                    }
                    other => {
                        problems.push((
                            *line,
                            Error::invalid(
                                "activation-checkpoint",
                                other,
                                format!("one of {}", AC_SUBCOMMANDS.join(", ")),
                            ),
                        ));
                        continue;
                    }
                };
                mapped.push(format!("activation-checkpoint:{name}"));
            }
            Item::Opt {
                key,
                value,
                switch,
                line,
            } => {
                let shown = match (value, switch) {
                    (Some(v), _) => format!("--{key} {v}"),
                    (None, Some(false)) => match key.rsplit_once('.') {
                        Some((section, last)) => format!("--{section}.no_{last}"),
                        None => format!("--no_{key}"),
                    },
                    (None, _) => format!("--{key}"),
                };
                // What the checks below compare: the word, or a switch's state.
                let text = value
                    .clone()
                    .unwrap_or_else(|| switch.unwrap_or(true).to_string());
                if let Some((_, kind)) = TABLED.iter().find(|(k, _)| k == key) {
                    match value_of(key, *kind, value.as_deref(), *switch) {
                        Ok(v) => {
                            schedule_given |= key == "parallelism.pipeline_parallel_schedule";
                            set(&mut root, key, v);
                            mapped.push(shown);
                        }
                        Err(e) => problems.push((*line, e)),
                    }
                    continue;
                }
                let refuse = |expected: &str| Error::invalid(format!("--{key}"), &text, expected);
                let outcome = match key.as_str() {
                    "parallelism.expert_parallel_degree" if text == "1" => Ok(false),
                    "parallelism.expert_parallel_degree" => {
                        Err(refuse("1: a llama3 model has no experts"))
                    }
                    "parallelism.enable_sequence_parallel" if text == "true" => Ok(true),
                    "parallelism.enable_sequence_parallel" => Err(refuse(
                        "on (its default): trainplan's torchtitan plans split the norms' activations over TP",
                    )),
                    "parallelism.pipeline_parallel_first_stage_less_layers"
                    | "parallelism.pipeline_parallel_last_stage_less_layers"
                        if text == "1" =>
                    {
                        Ok(false)
                    }
                    "parallelism.pipeline_parallel_first_stage_less_layers"
                    | "parallelism.pipeline_parallel_last_stage_less_layers" => Err(refuse(
                        "1 (its default): the stage split trainplan plans for torchtitan",
                    )),
                    "parallelism.pipeline_parallel_schedule_csv" if text.is_empty() => Ok(false),
                    "parallelism.pipeline_parallel_schedule_csv" => Err(refuse(
                        "none: a schedule from a file is not one trainplan models",
                    )),
                    "parallelism.module_fqns_per_model_part" => Err(refuse(
                        "none: the stage split is trainplan's (layers per stage)",
                    )),
                    "training.dtype" if text == "float32" => Ok(false),
                    "training.dtype" => Err(refuse(
                        "float32 (its default): FP32 parameters with BF16 compute, the mixed precision trainplan counts",
                    )),
                    "optimizer.param_groups.optimizer_name"
                        if text == "AdamW" || text == "Adam" =>
                    {
                        Ok(false)
                    }
                    "optimizer.param_groups.optimizer_name" => Err(refuse(
                        "Adam or AdamW: the optimizer whose state and step trainplan counts",
                    )),
                    "activation_checkpoint.memory_budget"
                    | "activation_checkpoint.visualize_memory_budget_pareto"
                        if !memory_budget =>
                    {
                        Ok(false)
                    }
                    k if UNUSED
                        .iter()
                        .any(|u| k == *u || (u.ends_with('.') && k.starts_with(u))) =>
                    {
                        Ok(false)
                    }
                    _ => Err(refuse("an option trainplan maps or knows to leave alone")),
                };
                match outcome {
                    Ok(true) => mapped.push(shown),
                    Ok(false) => from_unused.push(shown),
                    Err(e) => refused.push((*line, e)),
                }
            }
        }
    }
    match ac {
        Ac::Selective => {
            set(
                &mut root,
                "activation_checkpoint.mode",
                Value::String("selective".into()),
            );
            set(
                &mut root,
                "activation_checkpoint.selective_ac_option",
                Value::String("op".into()),
            );
        }
        Ac::Full => set(
            &mut root,
            "activation_checkpoint.mode",
            Value::String("full".into()),
        ),
        Ac::None => set(
            &mut root,
            "activation_checkpoint.mode",
            Value::String("none".into()),
        ),
    }
    // A schedule torchtitan uses only with a pipeline.
    let pp = root
        .get("parallelism")
        .and_then(|p| p.get("pipeline_parallel_degree"))
        .and_then(Value::as_integer)
        .unwrap_or(1);
    if pp == 1 {
        if let Some(Value::Table(p)) = root.get_mut("parallelism") {
            if let Some(s) = p.remove("pipeline_parallel_schedule") {
                if schedule_given {
                    from_unused.push(format!(
                        "--parallelism.pipeline_parallel_schedule {} (no pipeline)",
                        s.as_str().unwrap_or("")
                    ));
                }
            }
        }
    }
    // torchtitan 0.3 captures CUDA graphs unless told not to, and refuses them with a pipeline
    // (`Trainer.Config.__post_init__`: "CUDA graphs do not support pipeline parallelism yet").
    let no_graphs = items.iter().any(|it| {
        matches!(it, Item::Opt { key, value: None, switch: Some(true), .. } if key == "training.disable_cuda_graphs")
    });
    if pp > 1 && !no_graphs {
        refused.push((
            0,
            Error::invalid(
                "--parallelism.pipeline_parallel_degree",
                pp,
                "a pipeline with --training.disable_cuda_graphs: torchtitan 0.3 refuses CUDA graphs with pipeline parallelism",
            ),
        ));
    }
    if !problems.is_empty() {
        problems.extend(refused);
        return Err(every_problem(&problems));
    }
    let mut from = super::torchtitan::from_table(&root, world)?;
    if named.flavor == "debugmodel" {
        from.model = FileModel::Dims(Box::new(debug_model()));
    }
    from.precision = Some(named.precision);
    from.fp8_params = (named.precision == Precision::Fp8).then_some(false);
    from.unused = from_unused;
    from.mapped = mapped;
    from.launcher = launcher_options
        .iter()
        .filter(|o| o.launcher)
        .map(|o| match &o.value {
            Some(v) => format!("{} {v}", o.name),
            None => o.name.clone(),
        })
        .collect();
    from.notes.extend(script.notes.iter().cloned());
    from.notes.push(format!(
        "torchtitan 0.3.0's named config {} (torchtitan/models/llama3/config_registry.py), with the command line's overrides",
        named.name
    ));
    if let Some(note) = named.note {
        from.notes.push(note.to_string());
    }
    from.refused = report(&refused);
    Ok(from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::step::stack::Stack;
    use crate::cost::step::Recompute;

    fn read(text: &str) -> Result<FromFile> {
        parse_with(text, &shell::Given::default(), None)
    }

    #[test]
    fn the_frozen_options_are_torchtitan_s_222() {
        let known = options();
        assert_eq!(known.len(), 222);
        for key in [
            "training.steps",
            "parallelism.tensor_parallel_degree",
            "compile.enable",
        ] {
            assert!(known.contains(key), "{key}");
        }
        // Every key the tables take is one of them.
        for (key, _) in TABLED {
            assert!(known.contains(key), "{key}");
        }
    }

    #[test]
    fn the_named_8b_config_reads_as_its_function_sets_it() {
        let f = read(
            "torchrun --nproc_per_node=8 -m torchtitan.train --module llama3 --config llama3_8b\n",
        )
        .unwrap();
        assert_eq!(f.model, FileModel::Preset("llama3-8b".into()));
        // llama3_8b: local batch 1, 8,192 tokens, 1,000 steps, per-op selective checkpointing;
        // the shard degree's −1 fills the 8 GPUs torchrun starts.
        assert_eq!(
            (f.gpus, f.dp, f.tp, f.zero.unwrap().get()),
            (Some(8), Some(8), Some(1), 3)
        );
        assert_eq!(f.tokens, Some(8 * 8192 * 1000));
        assert_eq!(f.recompute, Some(Recompute::SelectiveOp));
        assert_eq!(f.stack, Some(Stack::Torchtitan));
        assert_eq!(f.precision, Some(Precision::Bf16));
        assert!(f.refused.is_empty(), "{:?}", f.refused);
    }

    #[test]
    fn overrides_in_tyro_s_spellings_change_the_named_config() {
        let f = read("python -m torchtitan.train --module llama3 --config llama3_70b --training.steps=100 --parallelism.data-parallel-shard-degree 4 --compile.enable --metrics.log_freq 1 --compile.components model,loss activation-checkpoint:selective\n").unwrap();
        assert_eq!(f.model, FileModel::Preset("llama3-70b".into()));
        assert_eq!((f.gpus, f.dp, f.tp), (Some(32), Some(4), Some(8)));
        assert_eq!(f.tokens, Some(8 * 4 * 8192 * 100));
        assert_eq!(f.recompute, Some(Recompute::SelectiveOp));
        assert_eq!(f.stack, Some(Stack::TorchtitanCompile));
        assert_eq!(f.unused, ["--metrics.log_freq 1"]);
        let f = read("python -m torchtitan.train --module llama3 --config llama3_8b_mxfp8 --compile.no-enable --parallelism.data_parallel_shard_degree 8 activation_checkpoint:none\n").unwrap();
        assert_eq!(f.stack, Some(Stack::Torchtitan));
        assert_eq!(f.precision, Some(Precision::Mxfp8));
        assert_eq!(f.recompute, Some(Recompute::None));
        assert!(
            f.notes.iter().any(|n| n.contains("output layer")),
            "{:?}",
            f.notes
        );
    }

    #[test]
    fn what_trainplan_cannot_plan_is_refused_by_name() {
        let f = read("python -m torchtitan.train --module llama3 --config llama3_405b --parallelism.data_parallel_shard_degree 64\n").unwrap();
        assert_eq!(f.refused.len(), 1);
        assert!(f.refused[0].contains("rowwise"), "{:?}", f.refused);
        let e = read("python -m torchtitan.train --module qwen3 --config qwen3_8b\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--module = qwen3") || e.contains("qwen3"), "{e}");
        let e = read("python -m torchtitan.train --module llama3 --config llama3_7b --parallelism.data_parallel_shard_degree 8\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("llama3_7b") && e.contains("llama3_8b_mxfp8"),
            "{e}"
        );
        // Subcommand options belong to their subcommand; one subcommand word.
        for (words, what) in [
            (
                "activation-checkpoint:full --activation-checkpoint.memory-budget 0.5",
                "memory-budget",
            ),
            (
                "activation-checkpoint:none --activation_checkpoint.debug",
                "selective or :full",
            ),
            (
                "activation-checkpoint:full activation-checkpoint:none",
                "one subcommand word",
            ),
        ] {
            let e = read(&format!("python -m torchtitan.train --module llama3 --config llama3_8b --parallelism.data_parallel_shard_degree 8 {words}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(what), "{words}: {e}");
        }
        // A repeated --config: ConfigManager keeps the last.
        let f = read("python -m torchtitan.train --module llama3 --config llama3_70b --config llama3_8b --parallelism.data_parallel_shard_degree 8\n").unwrap();
        assert_eq!(f.model, FileModel::Preset("llama3-8b".into()));
        // A misspelt option and a bad value, both at once.
        let e = read("python -m torchtitan.train --module llama3 --config llama3_8b --training.stepz 10 --training.steps ten --parallelism.data_parallel_shard_degree 8\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--training.stepz") && e.contains("ten"), "{e}");
    }

    #[test]
    fn gpus_given_stand_for_the_launcher_and_a_pipeline_needs_cuda_graphs_off() {
        let alone = "python -m torchtitan.train --module llama3 --config llama3_8b\n";
        let f = parse_with(alone, &shell::Given::default(), Some(16)).unwrap();
        assert_eq!((f.gpus, f.dp), (Some(16), Some(16)));
        let pp = "python -m torchtitan.train --module llama3 --config llama3_8b --parallelism.pipeline_parallel_degree 2 --parallelism.data_parallel_shard_degree 4\n";
        let f = read(pp).unwrap();
        assert!(
            f.refused[0].contains("disable_cuda_graphs"),
            "{:?}",
            f.refused
        );
        let f = read(&pp.replace("\n", " --training.disable_cuda_graphs\n")).unwrap();
        assert!(f.refused.is_empty(), "{:?}", f.refused);
        // Two commands that run it are not one job; a comment that names it is no command.
        let e = read(&format!("{alone}{alone}")).unwrap_err().to_string();
        assert!(e.contains("several"), "{e}");
        assert!(!is_job(
            "# see torchtitan.train\npython pretrain_gpt.py --num-layers 2\n"
        ));
        // Another module: one line.
        let e = read("python -m torchtitan.train --module qwen3 --config qwen3_8b\n")
            .unwrap_err()
            .to_string();
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }

    #[test]
    fn the_debug_model_is_built_from_its_dimensions() {
        let f = read("NGPU=${NGPU:-\"8\"}\nCONFIG=${CONFIG:-\"llama3_debugmodel\"}\ntorchrun --nproc_per_node=${NGPU} -m torchtitan.train --module llama3 --config ${CONFIG} \"$@\"\n").unwrap();
        match f.model {
            FileModel::Dims(d) => assert_eq!(
                (d.layers, d.hidden, d.ffn, d.vocab),
                (6, 256, 768, Some(2048))
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(f.tokens, Some(8 * 8 * 2048 * 10));
    }
}
