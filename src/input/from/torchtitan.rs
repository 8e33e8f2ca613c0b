//! A torchtitan job TOML read back (the keys `export --format torchtitan` writes, torchtitan
//! 0.2.2's `job_config.py`).
//!
//! The model is a llama3 flavor (8B, 70B, 405B: the presets, Llama 3.1's RoPE and ε) or, for
//! any other, `--model-config`/the model flags. The degrees give the layout: DP is
//! `data_parallel_replicate_degree × data_parallel_shard_degree`; FSDP's resharding gives the
//! ZeRO stage (`always` 3, `never` 2 — what `export` writes for ZeRO 0 with TP/PP, 1 and 2,
//! each no lighter than ZeRO 2 —, `default` 3 without a pipeline and 2 with one, or plain
//! replication, ZeRO 0, when the shard degree is 1 and nothing else is parallel). The step:
//! the pipeline's micro-batch (or the local batch without one), the global batch, the
//! schedule, activation checkpointing (`selective` `op` is selective-op, `2` selective-layer),
//! the float8/MX converters; the stack is torchtitan's, compiled when `[compile] enable`.

use std::path::Path;

use toml::{Table, Value};

use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Stack;
use crate::cost::step::Recompute;
use crate::cost::step::Schedule;
use crate::error::{Error, Result};
use crate::model::layout::ZeroStage;

use super::design::{times, FileModel, FromFile, Source};

/// Sections that do not change the plan, read and left alone.
const UNUSED_SECTIONS: [&str; 12] = [
    "job",
    "profiling",
    "metrics",
    "optimizer",
    "lr_scheduler",
    "checkpoint",
    "comm",
    "validation",
    "fault_tolerance",
    "experimental",
    "memory_estimation",
    "float8",
];

/// An `[optimizer]` section's optimizer is Adam or AdamW (torchtitan's default, AdamW), whose
/// state (master weights and two moments) and step trainplan counts; another's differ, so
/// it is refused, not read as Adam.
fn optimizer_is_adam(section: &Value) -> Result<()> {
    match section.get("name") {
        None => Ok(()),
        Some(Value::String(n)) if n == "Adam" || n == "AdamW" => Ok(()),
        Some(v) => Err(error(
            "optimizer.name",
            v,
            "Adam or AdamW: the optimizer whose state and step trainplan counts",
        )),
    }
}

/// `[training]` keys that do not change the plan.
const UNUSED_TRAINING: [&str; 11] = [
    "dataset",
    "dataset_path",
    "max_norm",
    "seed",
    "deterministic",
    "mixed_precision_reduce",
    "gc_freq",
    "warmup_steps",
    "enable_cpu_offload",
    "debug_moe_force_load_balance",
    "dataloader",
];

/// An error naming `key` (escaped: a TOML key may hold a line break) and its value.
fn error(key: &str, value: impl ToString, expected: impl Into<String>) -> Error {
    Error::invalid(
        key.escape_debug().to_string(),
        value.to_string().escape_debug(),
        expected,
    )
}

/// torchtitan 0.2.2's defaults (`torchtitan/config/job_config.py`) for the keys a job file may
/// leave out, which torchtitan itself then runs with: `training.local_batch_size`, `seq_len`,
/// `steps`, and `activation_checkpoint.selective_ac_option` ("2": every other layer).
const DEFAULT_LOCAL_BATCH: u64 = 8;
const DEFAULT_SEQ_LEN: u64 = 2048;
const DEFAULT_STEPS: u64 = 10_000;
const DEFAULT_SELECTIVE_AC_OPTION: &str = "2";

/// `key`, torchtitan's "-1: worked out from the others" (its default for
/// `data_parallel_shard_degree` and `global_batch_size`) read as `None`, else a whole number.
fn int_or_rest(table: &Table, section: &str, key: &str) -> Result<Option<u64>> {
    match table.get(key) {
        None | Some(Value::Integer(-1)) => Ok(None),
        _ => int(table, section, key),
    }
}

fn int(table: &Table, section: &str, key: &str) -> Result<Option<u64>> {
    let name = format!("{section}.{key}");
    match table.get(key) {
        None => Ok(None),
        Some(Value::Integer(n)) if *n >= 1 => Ok(Some(*n as u64)),
        Some(v) => Err(error(&name, v, "a whole number ≥ 1")),
    }
}

fn string<'a>(table: &'a Table, section: &str, key: &str) -> Result<Option<&'a str>> {
    match table.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(v) => Err(error(&format!("{section}.{key}"), v, "a string")),
    }
}

/// Refuses the keys of `table` not in `known`, naming the first.
fn only(table: &Table, section: &str, known: &[&str], unused: &mut Vec<String>) -> Result<()> {
    for (key, value) in table {
        if section == "training" && UNUSED_TRAINING.contains(&key.as_str()) {
            unused.push(format!("training.{key} = {value}"));
            continue;
        }
        if !known.contains(&key.as_str()) {
            return Err(error(
                &format!("{section}.{key}"),
                value,
                "a key trainplan maps to the design or knows to leave the plan alone (take it out, or state it with trainplan's flags if it changes the design)",
            ));
        }
    }
    Ok(())
}

/// The design the TOML `text` (the file at `path`) states.
pub fn parse(text: &str, path: &Path) -> Result<FromFile> {
    parse_with(text, path, None)
}

/// [`parse`], with the world size when the user gives it (`--gpus`): what torchtitan's
/// `data_parallel_shard_degree = -1` (its default, in every example job) resolves against —
/// every GPU the other degrees leave.
pub fn parse_with(text: &str, path: &Path, world: Option<u64>) -> Result<FromFile> {
    let root: Table = text.parse().map_err(|e: toml::de::Error| {
        // The whole message on one line (a table given twice is "invalid table header" then
        // "duplicate key …"), with where it is.
        let message: Vec<&str> = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let at = e.span().map_or(String::new(), |span| {
            format!(" at line {}", crate::input::line_column(text, span.start).0)
        });
        Error::Parse {
            path: path.to_path_buf(),
            message: format!(
                "not a torchtitan job TOML: {}{at}",
                if message.is_empty() {
                    "invalid TOML".to_string()
                } else {
                    message.join(": ")
                }
            ),
        }
    })?;
    from_table(&root, world)
}

/// The design a job's tables state (a TOML file's, or those torchtitan 0.3's named config and
/// command line build, [`super::torchtitan_cli`]), with the world size when given.
pub(super) fn from_table(root: &Table, world: Option<u64>) -> Result<FromFile> {
    let mut from = FromFile::new(Source::Torchtitan);
    let empty = Table::new();
    let section = |name: &str| -> Result<&Table> {
        match root.get(name) {
            None => Ok(&empty),
            Some(Value::Table(t)) => Ok(t),
            Some(v) => Err(error(name, v, "a table")),
        }
    };
    for (key, value) in root {
        let k = key.as_str();
        if k == "optimizer" {
            optimizer_is_adam(value)?;
            from.unused.push(format!("[{k}]"));
        } else if UNUSED_SECTIONS.contains(&k) {
            from.unused.push(format!("[{k}]"));
        } else if ![
            "model",
            "training",
            "parallelism",
            "activation_checkpoint",
            "compile",
            "quantize",
        ]
        .contains(&k)
        {
            return Err(error(
                k,
                value,
                "a torchtitan section trainplan maps or knows to leave the plan alone",
            ));
        }
    }
    // The model and its converters.
    let model = section("model")?;
    only(
        model,
        "model",
        &[
            "name",
            "flavor",
            "converters",
            "hf_assets_path",
            "tokenizer_path",
        ],
        &mut from.unused,
    )?;
    match string(model, "model", "name")? {
        Some("llama3") | None => {}
        Some(other) => {
            return Err(error(
                "model.name",
                other,
                "llama3, the model trainplan plans",
            ))
        }
    }
    from.model = match string(model, "model", "flavor")? {
        None | Some("CHANGE-ME") => FileModel::Unstated,
        Some(flavor) => {
            let presets = crate::model::presets();
            let name = ["8B", "70B", "405B"]
                .iter()
                .position(|f| *f == flavor)
                .map(|i| presets[i].name.clone())
                .ok_or_else(|| {
                    error(
                        "model.flavor",
                        flavor,
                        "8B, 70B or 405B (a flavor of its own: give --model-config)",
                    )
                })?;
            FileModel::Preset(name)
        }
    };
    let converters: Vec<&str> = match model.get("converters") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| error("model.converters", v, "strings"))
            })
            .collect::<Result<_>>()?,
        Some(v) => return Err(error("model.converters", v, "a list of converters")),
    };
    let quantize = section("quantize")?;
    only(quantize, "quantize", &["linear"], &mut from.unused)?;
    let linear = match quantize.get("linear") {
        None => &empty,
        Some(Value::Table(t)) => t,
        Some(v) => return Err(error("quantize.linear", v, "a table")),
    };
    only(
        linear,
        "quantize.linear",
        &["float8", "mx"],
        &mut from.unused,
    )?;
    for (name, converter) in [
        ("float8", "quantize.linear.float8"),
        ("mx", "quantize.linear.mx"),
    ] {
        let named = converters.iter().any(|c| *c == converter || *c == name);
        if linear.contains_key(name) && !named {
            // Settings of a converter the model does not list: torchtitan leaves them alone.
            from.unused.push(format!("[quantize.linear.{name}]"));
        }
    }
    let recipe = |name: &str, want: &str| -> Result<()> {
        let t = match linear.get(name) {
            Some(Value::Table(t)) => t,
            _ => return Ok(()),
        };
        let section = format!("quantize.linear.{name}");
        only(
            t,
            &section,
            &[
                "recipe_name",
                "filter_fqns",
                "enable_fsdp_float8_all_gather",
            ],
            &mut Vec::new(),
        )?;
        match string(t, &section, "recipe_name")? {
            Some(r) if r != want => {
                return Err(error(
                    &format!("{section}.recipe_name"),
                    r,
                    format!("{want}, the recipe the precision model counts"),
                ))
            }
            _ => {}
        }
        match t.get("filter_fqns") {
            Some(Value::Array(a)) if a.len() == 1 && a[0].as_str() == Some("output") => Ok(()),
            v => Err(error(
                &format!("{section}.filter_fqns"),
                v.map_or("missing".into(), |v| v.to_string()),
                "[\"output\"]: the output layer in BF16, as the precision model counts",
            )),
        }
    };
    from.precision = Some(match converters.as_slice() {
        [] => Precision::Bf16,
        ["quantize.linear.float8"] | ["float8"] => {
            recipe("float8", "tensorwise")?;
            // FSDP2's float8 all-gather keeps and gathers the weights in FP8 (--fp8-params).
            let gather = match linear.get("float8") {
                Some(Value::Table(t)) => t.get("enable_fsdp_float8_all_gather"),
                _ => None,
            };
            from.fp8_params = Some(match gather {
                None => false,
                Some(Value::Boolean(b)) => *b,
                Some(v) => {
                    return Err(error(
                        "quantize.linear.float8.enable_fsdp_float8_all_gather",
                        v,
                        "true or false",
                    ))
                }
            });
            Precision::Fp8
        }
        ["quantize.linear.mx"] | ["mx"] => {
            recipe("mx", "mxfp8_cublas")?;
            Precision::Mxfp8
        }
        other => {
            return Err(error(
                "model.converters",
                other.join(", "),
                "none, quantize.linear.float8 or quantize.linear.mx",
            ))
        }
    });
    // The step.
    let training = section("training")?;
    only(
        training,
        "training",
        &[
            "local_batch_size",
            "global_batch_size",
            "seq_len",
            "steps",
            "mixed_precision_param",
        ],
        &mut from.unused,
    )?;
    match string(training, "training", "mixed_precision_param")? {
        Some("bfloat16") | None => {}
        Some(other) => {
            return Err(error(
                "training.mixed_precision_param",
                other,
                "bfloat16, the precision every plan computes in",
            ))
        }
    }
    let local_batch = int(training, "training", "local_batch_size")?.unwrap_or(DEFAULT_LOCAL_BATCH);
    let local = Some(local_batch);
    let seq = Some(int(training, "training", "seq_len")?.unwrap_or(DEFAULT_SEQ_LEN));
    let steps = Some(int(training, "training", "steps")?.unwrap_or(DEFAULT_STEPS));
    from.seq_len = seq;
    // -1 (the default): the local batch on every DP rank, once DP is known below.
    let global = int_or_rest(training, "training", "global_batch_size")?;
    // The layout.
    let p = section("parallelism")?;
    only(
        p,
        "parallelism",
        &[
            "data_parallel_replicate_degree",
            "data_parallel_shard_degree",
            "fsdp_reshard_after_forward",
            "tensor_parallel_degree",
            "pipeline_parallel_degree",
            "pipeline_parallel_schedule",
            "pipeline_parallel_microbatch_size",
            "pipeline_parallel_layers_per_stage",
            "context_parallel_degree",
            "context_parallel_rotate_method",
        ],
        &mut from.unused,
    )?;
    let degree = |key: &str| int(p, "parallelism", key).map(|d| d.unwrap_or(1));
    let replicate = degree("data_parallel_replicate_degree")?;
    let (tp, pp, cp) = (
        degree("tensor_parallel_degree")?,
        degree("pipeline_parallel_degree")?,
        degree("context_parallel_degree")?,
    );
    // torchtitan's default, -1, shards over every GPU the other degrees leave: the world size,
    // which the file does not hold; it is the --gpus given, or the degree must be stated.
    let field = "parallelism.data_parallel_shard_degree";
    let shard = match (int_or_rest(p, "parallelism", "data_parallel_shard_degree")?, world) {
        (Some(shard), _) => shard,
        (None, Some(gpus)) => {
            let others = times(field, times(field, tp, pp)?, times(field, cp, replicate)?)?;
            if gpus % others != 0 {
                return Err(error(
                    field,
                    "-1",
                    format!("a world of --gpus {gpus} that TP × PP × CP × replicate = {others} divides (-1 is every GPU they leave)"),
                ));
            }
            gpus / others
        }
        (None, None) => {
            return Err(error(
                field,
                "-1",
                "the world size to resolve it against: give --gpus (torchtitan's -1 is every GPU the other degrees leave, and the file does not hold the world size), or write the degree",
            ))
        }
    };
    let dp = times("parallelism.data_parallel_shard_degree", replicate, shard)?;
    let reshard = string(p, "parallelism", "fsdp_reshard_after_forward")?.unwrap_or("default");
    let ddp = shard == 1 && tp == 1 && pp == 1 && cp == 1;
    let zero = match reshard {
        "default" if ddp => 0,
        "always" => 3,
        "never" => 2,
        "default" if pp == 1 => 3,
        "default" => 2,
        other => {
            return Err(error(
                "parallelism.fsdp_reshard_after_forward",
                other,
                "default, always or never",
            ))
        }
    };
    match string(p, "parallelism", "context_parallel_rotate_method")? {
        None | Some("allgather") => {}
        Some(other) => {
            return Err(error(
                "parallelism.context_parallel_rotate_method",
                other,
                "allgather, the K/V exchange torchtitan's stack is graded with",
            ))
        }
    }
    from.tp = Some(tp);
    from.pp = Some(pp);
    from.cp = Some(cp);
    from.dp = Some(dp);
    from.zero = Some(ZeroStage::new(zero)?);
    from.replicate = Some(if zero == 0 { 1 } else { replicate });
    let world = times(
        "parallelism",
        times("parallelism", dp, tp)?,
        times("parallelism", pp, cp)?,
    )?;
    from.gpus = Some(world);
    from.global_batch = match global {
        Some(g) => Some(g),
        // torchtitan: `global_batch_size` -1 is `local_batch_size × DP`.
        None => Some(times("training.local_batch_size", local_batch, dp)?),
    };
    from.sequence_parallel = Some(tp > 1);
    let micro = int(p, "parallelism", "pipeline_parallel_microbatch_size")?;
    from.micro_batch = if pp > 1 {
        Some(micro.unwrap_or(1))
    } else {
        if let (Some(m), Some(l)) = (micro, local) {
            if m != l {
                return Err(error(
                    "parallelism.pipeline_parallel_microbatch_size",
                    m,
                    format!("training.local_batch_size = {l} without a pipeline"),
                ));
            }
        }
        local
    };
    let schedule = string(p, "parallelism", "pipeline_parallel_schedule")?.unwrap_or("1F1B");
    from.schedule = Some(
        // PyTorch's `get_schedule_class` matches the names without regard to case.
        match schedule.to_ascii_lowercase().as_str() {
            "1f1b" => Schedule::OneFOneB,
            // Two stages a GPU in a V (torchtitan's "v" style; its default for a schedule of
            // several stages a GPU); a layers-per-stage given is checked for two.
            v @ ("zbvzerobubble" | "dualpipev") => {
                from.layers_per_stage =
                    int(p, "parallelism", "pipeline_parallel_layers_per_stage")?;
                if v == "dualpipev" {
                    Schedule::DualPipeV
                } else {
                    Schedule::ZeroBubbleV
                }
            }
            "interleaved1f1b" => {
                from.layers_per_stage = Some(
                    int(p, "parallelism", "pipeline_parallel_layers_per_stage")?.ok_or_else(
                        || {
                            error(
                                "parallelism.pipeline_parallel_layers_per_stage",
                                "missing",
                                "the layers a stage of Interleaved1F1B",
                            )
                        },
                    )?,
                );
                Schedule::OneFOneB
            }
            _ => return Err(error(
                "parallelism.pipeline_parallel_schedule",
                schedule,
                "1F1B, Interleaved1F1B, ZBVZeroBubble or DualPipeV, the schedules trainplan models",
            )),
        },
    );
    // Each DP rank's batch against the global batch.
    if let (Some(g), Some(l), Some(m)) = (from.global_batch, local, from.micro_batch) {
        let per_rank = if pp > 1 { l } else { m };
        if per_rank == 0 || g % times("training.local_batch_size", per_rank, dp)? != 0 {
            return Err(error(
                "training.global_batch_size",
                g,
                format!("a whole multiple of local_batch_size {l} × DP {dp}"),
            ));
        }
        if pp > 1 && (l % m != 0 || l * dp != g) {
            return Err(error(
                "training.local_batch_size",
                l,
                format!("with a pipeline, the step's micro-batches of {m} a DP rank: global_batch_size {g} / DP {dp}"),
            ));
        }
    }
    // Activation checkpointing.
    let ac = section("activation_checkpoint")?;
    only(
        ac,
        "activation_checkpoint",
        &["mode", "selective_ac_option"],
        &mut from.unused,
    )?;
    from.recompute = Some(
        match (
            string(ac, "activation_checkpoint", "mode")?.unwrap_or("selective"),
            string(ac, "activation_checkpoint", "selective_ac_option")?,
        ) {
            ("none", _) => Recompute::None,
            ("full", _) => Recompute::Full,
            ("selective", Some("op")) => Recompute::SelectiveOp,
            ("selective", Some(DEFAULT_SELECTIVE_AC_OPTION) | None) => Recompute::SelectiveLayer,
            (mode, option) => {
                return Err(error(
                    "activation_checkpoint.selective_ac_option",
                    format!("{mode} {}", option.unwrap_or("")),
                    "none, full, or selective with op (selective-op) or 2 (selective-layer: every other layer)",
                ))
            }
        },
    );
    let compile = section("compile")?;
    only(
        compile,
        "compile",
        &["enable", "components", "backend"],
        &mut from.unused,
    )?;
    from.stack = Some(match compile.get("enable") {
        Some(Value::Boolean(true)) => Stack::TorchtitanCompile,
        None | Some(Value::Boolean(false)) => Stack::Torchtitan,
        Some(v) => return Err(error("compile.enable", v, "true or false")),
    });
    if let (Some(g), Some(s), Some(n)) = (from.global_batch, seq, steps) {
        from.tokens = Some(times(
            "training.steps",
            times("training.seq_len", g, s)?,
            n,
        )?);
    } else {
        return Err(error(
            "training",
            "steps, global_batch_size or seq_len missing",
            "steps, global_batch_size and seq_len, which make the tokens",
        ));
    }
    Ok(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_optimizer_other_than_adam_is_refused_not_read_as_adam() {
        let text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 1\nglobal_batch_size = 64\nseq_len = 8192\nsteps = 10\n[parallelism]\ndata_parallel_shard_degree = 64\n[optimizer]\nname = \"NAME\"\n";
        for ok in ["AdamW", "Adam"] {
            assert!(parse(&text.replace("NAME", ok), Path::new("x.toml")).is_ok());
        }
        let e = parse(&text.replace("NAME", "Muon"), Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("optimizer.name") && e.contains("Muon"), "{e}");
    }

    #[test]
    fn a_minimal_job_reads_and_unknown_keys_are_named() {
        let text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 1\nglobal_batch_size = 64\nseq_len = 8192\nsteps = 10\n[parallelism]\ndata_parallel_shard_degree = 64\nfsdp_reshard_after_forward = \"always\"\n[optimizer]\nlr = 3e-4\n";
        let f = parse(text, Path::new("x.toml")).unwrap();
        assert_eq!(f.model, FileModel::Preset("llama3-8b".into()));
        assert_eq!(
            (f.gpus, f.dp, f.zero.unwrap().get()),
            (Some(64), Some(64), 3)
        );
        assert_eq!(f.tokens, Some(64 * 8192 * 10));
        assert_eq!(f.unused, ["[optimizer]"]);
        let e = parse(&format!("{text}[parallelism.x]\n"), Path::new("x.toml"));
        assert!(e.is_err());
        let e = parse(
            &text.replace("[optimizer]", "[parallelism2]"),
            Path::new("x.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("parallelism2"), "{e}");
    }

    #[test]
    fn an_unknown_quantize_key_and_a_table_given_twice_are_named() {
        let text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\ndata_parallel_shard_degree = 64\n";
        let e = parse(&format!("{text}[quantize]\nfoo = 1\n"), Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid quantize.foo = 1"), "{e}");
        let e = parse(
            &format!("{text}[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\nfilter_fqns = [\"output\"]\n[quantize.linear.fp4]\nx = 1\n"),
            Path::new("x.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("invalid quantize.linear.fp4"), "{e}");
        // A converter's settings without the converter are read and not used.
        let f = parse(
            &format!("{text}[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n"),
            Path::new("x.toml"),
        )
        .unwrap();
        assert_eq!(f.precision, Some(Precision::Bf16));
        assert_eq!(f.unused, ["[quantize.linear.float8]"]);
        let e = parse(
            &format!("{text}[training]\nsteps = 1\n[training]\nseq_len = 8\n"),
            Path::new("x.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("duplicate key `training`") && e.contains("line 8") && !e.contains('\n'),
            "{e}"
        );
    }

    #[test]
    fn what_the_file_leaves_out_is_torchtitan_s_default_or_refused() {
        // torchtitan 0.2.2's defaults: local batch 8, sequence 2,048, 10,000 steps, selective
        // recomputation of every other layer, and a global batch of local batch × DP (-1).
        let text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\ndata_parallel_shard_degree = 64\n[activation_checkpoint]\nmode = \"selective\"\n";
        let f = parse(text, Path::new("x.toml")).unwrap();
        assert_eq!(f.micro_batch, Some(8));
        assert_eq!(f.seq_len, Some(2048));
        assert_eq!(f.global_batch, Some(8 * 64));
        assert_eq!(f.tokens, Some(8 * 64 * 2048 * 10_000));
        assert_eq!(f.recompute, Some(Recompute::SelectiveLayer));
        let minus_one = text.replace(
            "[parallelism]",
            "[training]\nglobal_batch_size = -1\n[parallelism]",
        );
        assert_eq!(
            parse(&minus_one, Path::new("x.toml")).unwrap().global_batch,
            Some(512)
        );
        // The shard degree's default (-1): every GPU TP × PP × CP × replicate leave of the
        // world size given (--gpus), which the file does not hold.
        let rest = text.replace(
            "data_parallel_shard_degree = 64",
            "data_parallel_shard_degree = -1\ntensor_parallel_degree = 2",
        );
        let f = parse_with(&rest, Path::new("x.toml"), Some(64)).unwrap();
        assert_eq!((f.gpus, f.dp, f.tp), (Some(64), Some(32), Some(2)));
        assert_eq!(f.global_batch, Some(8 * 32));
        let e = parse_with(&rest, Path::new("x.toml"), Some(63))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--gpus 63") && e.contains("= 2 divides"), "{e}");
        for shard in [
            "data_parallel_shard_degree = 64\n",
            "data_parallel_shard_degree = 64",
        ] {
            for instead in ["", "data_parallel_shard_degree = -1\n"] {
                let e = parse(&text.replacen(shard, instead, 1), Path::new("x.toml"))
                    .unwrap_err()
                    .to_string();
                assert!(
                    e.contains("parallelism.data_parallel_shard_degree = -1"),
                    "{e}"
                );
            }
        }
    }
}
