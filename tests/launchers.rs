//! The launchers' own names: every option the Megatron-LM exporter writes is one
//! `megatron/training/arguments.py` registers at the pinned commit, every torchtitan key one
//! its `JobConfig` has, every DeepSpeed key one its config code reads — checked against the
//! lists extracted from those sources (`tests/fixtures/launchers/`, with their sources and
//! commands). With `TRAINPLAN_LAUNCHER_TESTS=required` (set by `.ci/run`, which installs them
//! from PyPI without torch) the torchtitan and DeepSpeed files are also parsed by the
//! launchers' own config code, through `TRAINPLAN_PYTHON` (default `python3`).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::trainplan;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/launchers")
}

/// The names of a list file, its `#` header left out.
fn names(file: &str) -> BTreeSet<String> {
    std::fs::read_to_string(fixtures().join(file))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// Designs that between them reach every branch of the exporters: ZeRO 0 to 3, TP with and
/// without SP, uneven and interleaved pipelines, recomputation modes, biases, tied
/// embeddings, sliding windows and other RoPE bases (Hugging Face configs), context
/// parallelism (ring and all-gather stacks), FP8 and MXFP8, and hybrid sharding.
#[rustfmt::skip]
const DESIGNS: &[&[&str]] = &[
    &["--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--pp", "8", "--zero", "1"],
    &["--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--pp", "64", "--zero", "3"],
    &["--model", "8b", "--tokens", "1e12", "--tp", "1", "--pp", "1", "--zero", "0", "--gpus", "64"],
    &["--model", "405b", "--tokens", "1e12", "--tp", "8", "--pp", "16", "--zero", "2"],
    &["--model", "70b", "--tokens", "1e12", "--tp", "4", "--pp", "4", "--zero", "1",
      "--memory", "detailed", "--micro-batch", "2", "--recompute", "selective",
      "--schedule", "interleaved:5"],
    &["--model", "405b", "--tokens", "1e12", "--tp", "8", "--pp", "16", "--zero", "1",
      "--memory", "detailed", "--recompute", "full", "--stack", "llama3", "--stages", "llama3"],
    &["--model-config", "tests/fixtures/hf/mistral-7b-v0.1/config.json", "--tokens", "1e12",
      "--tp", "8", "--pp", "2", "--zero", "1"],
    &["--model-config", "tests/fixtures/hf/qwen2.5-7b/config.json", "--tokens", "1e12",
      "--tp", "4", "--pp", "1", "--zero", "1"],
    &["--model-config", "tests/fixtures/hf/llama-3.2-1b/config.json", "--tokens", "1e11",
      "--tp", "1", "--pp", "1", "--zero", "3", "--gpus", "256"],
    // Llama 3.1 70B, TP 4 × CP 2 × PP 4 on 64 GPUs: DP 2.
    &["--model", "70b", "--tokens", "1e12", "--tp", "4", "--pp", "4", "--cp", "2", "--zero", "1",
      "--gpus", "64"],
    // CP under a stack that all-gathers K/V, with Megatron-FSDP.
    &["--model", "70b", "--tokens", "1e12", "--tp", "8", "--pp", "1", "--cp", "4", "--zero", "2",
      "--memory", "detailed", "--stack", "llama3"],
    &["--model", "70b", "--tokens", "1e12", "--tp", "8", "--pp", "8", "--zero", "1",
      "--memory", "detailed", "--precision", "fp8"],
    // Hybrid sharding: ZeRO 3 in 4 replicas of 64 ranks.
    &["--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--pp", "1", "--zero", "3",
      "--replicate", "4"],
    // All three: CP 2, 2 replicas of the distributed optimizer, MXFP8 on B200s.
    &["--model", "8b", "--tokens", "1e12", "--tp", "2", "--pp", "1", "--cp", "2", "--zero", "1",
      "--replicate", "2", "--gpus", "64", "--gpu", "b200", "--memory", "detailed",
      "--precision", "mxfp8"],
    // A mixture of experts on the expert grid, DeepEP, the all-to-all overlap and Megatron-core's
    // recompute modules; and Qwen1.5-MoE, whose gated shared experts Megatron-LM refuses.
    &["--model-config", "tests/fixtures/hf/mixtral-8x7b-v0.1/config.json", "--tokens", "1e12",
      "--tp", "2", "--pp", "4", "--ep", "8", "--etp", "1", "--zero", "1", "--gpus", "64",
      "--memory", "detailed", "--recompute", "none", "--schedule", "interleaved:2",
      "--moe-recompute", "act", "--norm-recompute", "on", "--ep-dispatcher", "deepep",
      "--ep-overlap", "on"],
    &["--model-config", "tests/fixtures/hf/qwen1.5-moe-a2.7b/config.json", "--tokens", "1e12",
      "--tp", "1", "--pp", "1", "--ep", "4", "--zero", "1", "--gpus", "16"],
    // FP8, and all three, graded as torchtitan runs them (its stack, FSDP2's ZeRO 2): a
    // detailed plan torchtitan would run as another (ZeRO 1) it refuses.
    &["--model", "70b", "--tokens", "1e12", "--tp", "8", "--pp", "8", "--zero", "2",
      "--memory", "detailed", "--precision", "fp8", "--stack", "torchtitan"],
    &["--model", "8b", "--tokens", "1e12", "--tp", "2", "--pp", "1", "--cp", "2", "--zero", "2",
      "--replicate", "2", "--gpus", "64", "--gpu", "b200", "--memory", "detailed",
      "--precision", "mxfp8", "--stack", "torchtitan-compile"],
    // FP8 recipes, FP8 weights, BF16 first and last layers, BF16 gradient reduction and the
    // precision-aware optimizer.
    &["--model", "70b", "--tokens", "1e12", "--tp", "4", "--pp", "8", "--zero", "1",
      "--gpus", "64", "--memory", "detailed", "--precision", "fp8", "--fp8-recipe", "tensorwise",
      "--fp8-params", "on", "--gradients", "bf16", "--fp8-bf16-layers", "1,1",
      "--optimizer-states", "bf16", "--master-weights", "fp32"],
    &["--model", "70b", "--tokens", "1e12", "--tp", "4", "--pp", "8", "--zero", "1",
      "--gpus", "64", "--memory", "detailed", "--precision", "fp8", "--fp8-recipe", "blockwise",
      "--optimizer-states", "bf16", "--master-weights", "remainders"],
    &["--model", "8b", "--tokens", "1e12", "--tp", "1", "--pp", "1", "--zero", "3",
      "--gpus", "64", "--gpu", "b200", "--memory", "detailed", "--precision", "mxfp8",
      "--fp8-params", "on", "--master-weights", "fp16"],
    // FP8 weights gathered by FSDP2 in float8 (torchao's enable_fsdp_float8_all_gather).
    &["--model", "8b", "--tokens", "1e12", "--tp", "1", "--pp", "1", "--zero", "3",
      "--gpus", "64", "--memory", "detailed", "--stack", "torchtitan", "--precision", "fp8",
      "--fp8-params", "on"],
    // The batch law's learning rate and AdamW settings (Megatron-LM and DeepSpeed at ZeRO 1,
    // torchtitan's own stack at ZeRO 2).
    &["--model", "70b", "--tokens", "3.4e12", "--gpus", "1024", "--tp", "8", "--pp", "4", "--zero", "1", "--memory", "detailed", "--time", "detailed", "--batch-law", "deepseek", "--max-days", "365"],
    &["--model", "70b", "--tokens", "3.4e12", "--gpus", "1024", "--tp", "8", "--pp", "4", "--zero", "2", "--memory", "detailed", "--time", "detailed", "--batch-law", "deepseek", "--max-days", "365", "--stack", "torchtitan", "--recompute", "full"],
];

/// Indices into [`DESIGNS`] of the designs with CP, FP8 and replicas.
const CP2: usize = 9;
const CP_ALLGATHER: usize = 10;
const FP8: usize = 11;
const HSDP: usize = 12;
const ALL_THREE: usize = 13;
const TITAN_FP8: usize = 16;
const TITAN_ALL_THREE: usize = 17;

/// The export of a design, or its one-line refusal (by name, status 2).
fn exported(format: &str, design: &[&str]) -> Result<String, String> {
    let out = trainplan()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["export", "-q", "--format", format])
        .args(design)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    match out.status.code() {
        Some(0 | 1) => Ok(String::from_utf8(out.stdout).unwrap()),
        Some(2) => {
            assert_eq!(err.lines().count(), 1, "{design:?}: {err}");
            assert!(err.contains("--format"), "{design:?}: {err}");
            Err(err)
        }
        code => panic!("{design:?}: exit {code:?}: {err}"),
    }
}

/// The export of a design, or `None` when the launcher refuses it (by name, status 2).
fn export(format: &str, design: &[&str]) -> Option<String> {
    exported(format, design).ok()
}

/// The GPUs a launcher file says to launch on (`# Launch on N GPUs`).
fn launch_gpus(text: &str) -> u64 {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("# Launch on "))
        .unwrap_or_else(|| panic!("no launch line:\n{text}"));
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// The value of a Megatron-LM option in an export, if written.
fn megatron_value<'a>(text: &'a str, option: &str) -> Option<&'a str> {
    text.lines().map(str::trim).find_map(|l| {
        l.strip_prefix(option)
            .and_then(|rest| rest.strip_prefix(' '))
    })
}

#[test]
fn every_megatron_option_written_is_one_megatron_lm_registers() {
    let known = names("megatron-arguments.txt");
    assert!(known.contains("--rotary-base") && known.len() > 500);
    let mut exported = 0;
    for design in DESIGNS {
        let Some(text) = export("megatron", design) else {
            continue;
        };
        exported += 1;
        for line in text.lines().map(str::trim).filter(|l| l.starts_with("--")) {
            let option = line.split_whitespace().next().unwrap();
            assert!(
                known.contains(option),
                "{design:?}: {option} is not a Megatron-LM option"
            );
        }
        // Megatron-LM's own batch arithmetic: DP = world / (TP·CP·PP), and the global batch
        // whole micro-batches over it.
        let degree = |option| megatron_value(&text, option).map_or(1, |v| v.parse().unwrap());
        let model_parallel = degree("--tensor-model-parallel-size")
            * degree("--context-parallel-size")
            * degree("--pipeline-model-parallel-size");
        let gpus = launch_gpus(&text);
        assert_eq!(gpus % model_parallel, 0, "{design:?}");
        let dp = gpus / model_parallel;
        let g = degree("--global-batch-size");
        let b = degree("--micro-batch-size");
        assert!(
            g > 0 && g % (b * dp) == 0,
            "{design:?}: G {g}, b {b}, DP {dp}"
        );
        let instances = degree("--num-distributed-optimizer-instances");
        assert_eq!(
            (dp * degree("--context-parallel-size")) % instances,
            0,
            "{design:?}"
        );
    }
    assert!(exported >= 12, "only {exported} designs exported");
}

#[test]
fn megatron_exports_context_parallelism_fp8_and_replicas() {
    let cp = export("megatron", DESIGNS[CP2]).unwrap();
    // 64 GPUs over TP 4 × CP 2 × PP 4: DP 2, 1,024 micro-batches of one a replica.
    assert_eq!(launch_gpus(&cp), 64);
    assert_eq!(megatron_value(&cp, "--context-parallel-size"), Some("2"));
    assert_eq!(megatron_value(&cp, "--cp-comm-type"), Some("p2p"));
    assert_eq!(megatron_value(&cp, "--global-batch-size"), Some("2048"));
    assert_eq!(megatron_value(&cp, "--micro-batch-size"), Some("1"));
    assert!(cp.contains("TP 4 × CP 2 × PP 4 × DP 2 = 64 GPUs"), "{cp}");
    let allgather = export("megatron", DESIGNS[CP_ALLGATHER]).unwrap();
    assert_eq!(
        megatron_value(&allgather, "--cp-comm-type"),
        Some("allgather")
    );
    assert_eq!(
        megatron_value(&allgather, "--data-parallel-sharding-strategy"),
        Some("optim_grads")
    );
    let fp8 = export("megatron", DESIGNS[FP8]).unwrap();
    assert_eq!(megatron_value(&fp8, "--fp8-format"), Some("hybrid"));
    assert_eq!(megatron_value(&fp8, "--fp8-recipe"), Some("delayed"));
    let hsdp = export("megatron", DESIGNS[HSDP]).unwrap();
    assert_eq!(
        megatron_value(&hsdp, "--num-distributed-optimizer-instances"),
        Some("4")
    );
    assert!(hsdp.lines().any(|l| l.trim() == "--use-megatron-fsdp"));
    let all = export("megatron", DESIGNS[ALL_THREE]).unwrap();
    for (option, value) in [
        ("--context-parallel-size", "2"),
        ("--num-distributed-optimizer-instances", "2"),
        ("--fp8-format", "e4m3"),
        ("--fp8-recipe", "mxfp8"),
    ] {
        assert_eq!(
            megatron_value(&all, option),
            Some(value),
            "{option}:\n{all}"
        );
    }
    assert!(all
        .lines()
        .any(|l| l.trim() == "--use-distributed-optimizer"));
}

#[test]
fn a_megatron_export_of_llama_3_70b_builds_llama_3_70b() {
    let text = export("megatron", DESIGNS[0]).unwrap();
    for want in [
        "--rotary-base 500000",
        "--norm-epsilon 1e-05",
        "--use-rope-scaling",
        "--make-vocab-size-divisible-by 32",
        "--overlap-grad-reduce",
        "--overlap-param-gather",
    ] {
        assert!(
            text.lines().any(|l| l.trim() == want),
            "{want} missing:\n{text}"
        );
    }
    // PP 64 over 80 layers: the stages check graded (48 of one layer, 16 of two), not 9-layer
    // ends.
    let deep = export("megatron", DESIGNS[1]).unwrap();
    assert!(
        deep.contains("--pipeline-model-parallel-layout \"Et|(t|)*47,(t*2|)*15,t*2L\""),
        "{deep}"
    );
    let mistral = export("megatron", DESIGNS[6]).unwrap();
    assert!(mistral.contains("--window-size 4095,0") && mistral.contains("--rotary-base 10000"));
}

/// The `section.key` names of a TOML document, nested tables dotted.
fn toml_keys(value: &toml::Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let toml::Value::Table(table) = value {
        for (k, v) in table {
            let name = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            if v.is_table() {
                toml_keys(v, &name, out);
            } else {
                out.insert(name);
            }
        }
    }
}

/// The `section.key` names of a ds_config, top-level scalars as `top-level.key`.
fn json_keys(value: &serde_json::Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (k, v) in value.as_object().unwrap() {
        match v.as_object() {
            Some(inner) => out.extend(inner.keys().map(|i| format!("{k}.{i}"))),
            None => {
                out.insert(format!("top-level.{k}"));
            }
        }
    }
    out
}

/// Runs a launcher's own checker on `text` when the tests are asked to
/// (`TRAINPLAN_LAUNCHER_TESTS=required`); otherwise only the name lists are checked.
fn upstream_check(script: &str, text: &str, extension: &str, extra: &[String]) {
    if std::env::var("TRAINPLAN_LAUNCHER_TESTS").as_deref() != Ok("required") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("config.{extension}"));
    std::fs::write(&path, text).unwrap();
    let python = std::env::var("TRAINPLAN_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(python)
        .arg(fixtures().join(script))
        .arg(&path)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script} refused:\n{text}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_torchtitan_key_written_is_one_its_job_config_has() {
    let known = names("torchtitan-keys.txt");
    let mut exported = 0;
    for design in DESIGNS {
        let Some(text) = export("torchtitan", design) else {
            continue;
        };
        exported += 1;
        let config = text.parse::<toml::Value>().unwrap();
        let mut keys = BTreeSet::new();
        toml_keys(&config, "", &mut keys);
        for key in keys {
            assert!(
                known.contains(&key),
                "{design:?}: {key} is not a torchtitan key"
            );
        }
        // torchtitan's own checks: dp_replicate × dp_shard × CP × TP × PP is the world
        // (ParallelDims), and the global batch whole local batches over dp_replicate ×
        // dp_shard (the trainer's batch degree).
        let p = &config["parallelism"];
        let degree = |key: &str| p[key].as_integer().unwrap();
        let batch_degree =
            degree("data_parallel_replicate_degree") * degree("data_parallel_shard_degree");
        let world = batch_degree
            * degree("context_parallel_degree")
            * degree("tensor_parallel_degree")
            * degree("pipeline_parallel_degree");
        assert_eq!(world as u64, launch_gpus(&text), "{design:?}");
        let t = &config["training"];
        let local = t["local_batch_size"].as_integer().unwrap();
        let global = t["global_batch_size"].as_integer().unwrap();
        assert_eq!(global % (local * batch_degree), 0, "{design:?}");
        let seq = t["seq_len"].as_integer().unwrap();
        let divisor = degree("tensor_parallel_degree") * 2 * degree("context_parallel_degree");
        assert_eq!(seq % divisor, 0, "{design:?}");
        upstream_check("check_torchtitan.py", &text, "toml", &[]);
    }
    assert!(exported >= 9, "only {exported} designs exported");
}

#[test]
fn torchtitan_exports_context_parallelism_fp8_and_replicas() {
    let parse =
        |i: usize| -> toml::Value { export("torchtitan", DESIGNS[i]).unwrap().parse().unwrap() };
    let cp = parse(CP2);
    let p = &cp["parallelism"];
    assert_eq!(p["context_parallel_degree"].as_integer(), Some(2));
    assert_eq!(
        p["context_parallel_rotate_method"].as_str(),
        Some("allgather")
    );
    assert_eq!(p["data_parallel_shard_degree"].as_integer(), Some(2));
    assert_eq!(p["data_parallel_replicate_degree"].as_integer(), Some(1));
    // A detailed ZeRO 1 plan would run as ZeRO 2 under FSDP2: refused by name.
    let e = exported("torchtitan", DESIGNS[FP8]).unwrap_err();
    assert!(e.contains("ZeRO 1, which would run as ZeRO 2"), "{e}");
    let fp8 = parse(TITAN_FP8);
    assert_eq!(
        fp8["model"]["converters"].as_array().unwrap(),
        &[toml::Value::from("quantize.linear.float8")]
    );
    assert_eq!(
        fp8["quantize"]["linear"]["float8"]["recipe_name"].as_str(),
        Some("tensorwise")
    );
    // HSDP: 4 replicas × 64 shards × TP 8 = 2,048.
    let hsdp = parse(HSDP);
    let p = &hsdp["parallelism"];
    assert_eq!(p["data_parallel_replicate_degree"].as_integer(), Some(4));
    assert_eq!(p["data_parallel_shard_degree"].as_integer(), Some(64));
    assert_eq!(p["fsdp_reshard_after_forward"].as_str(), Some("always"));
    let all = parse(TITAN_ALL_THREE);
    assert_eq!(all["compile"]["enable"].as_bool(), Some(true));
    let p = &all["parallelism"];
    assert_eq!(
        (
            p["data_parallel_replicate_degree"].as_integer(),
            p["data_parallel_shard_degree"].as_integer(),
            p["context_parallel_degree"].as_integer(),
        ),
        (Some(2), Some(8), Some(2))
    );
    assert_eq!(
        all["model"]["converters"].as_array().unwrap(),
        &[toml::Value::from("quantize.linear.mx")]
    );
}

#[test]
fn every_deepspeed_key_written_is_one_its_config_reads() {
    let known = names("deepspeed-keys.txt");
    let mut exported = 0;
    for design in DESIGNS {
        let Some(text) = export("deepspeed", design) else {
            continue;
        };
        exported += 1;
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        for key in json_keys(&value) {
            assert!(
                known.contains(&key),
                "{design:?}: {key} is not a DeepSpeed key"
            );
        }
        let ranks = value["train_batch_size"].as_u64().unwrap()
            / value["train_micro_batch_size_per_gpu"].as_u64().unwrap()
            / value["gradient_accumulation_steps"].as_u64().unwrap();
        upstream_check(
            "check_deepspeed.py",
            &text,
            "json",
            &["--world-size".into(), ranks.to_string()],
        );
    }
    assert!(exported >= 4, "only {exported} designs exported");
}

#[test]
fn deepspeed_refuses_context_parallelism_fp8_and_replicas_by_name() {
    for (design, needles) in [
        (CP2, &["cp = 2", "Ulysses"][..]),
        (CP_ALLGATHER, &["cp = 4"][..]),
        (FP8, &["precision = fp8", "Transformer Engine"][..]),
        (HSDP, &["replicate = 4 with ZeRO 3", "mics_shard_size"][..]),
    ] {
        let err = exported("deepspeed", DESIGNS[design]).unwrap_err();
        for needle in needles {
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }
}

/// The words after `-m torchtitan.train` of a torchtitan 0.3 export.
fn torchtitan03_words(text: &str) -> Vec<String> {
    let joined: String = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.trim_end_matches('\\'))
        .collect::<Vec<_>>()
        .join(" ");
    let (_, after) = joined
        .split_once("-m torchtitan.train")
        .unwrap_or_else(|| panic!("no torchtitan.train:\n{text}"));
    after.split_whitespace().map(String::from).collect()
}

/// torchtitan 0.3's command line: every option written is one torchtitan 0.3.0 freezes
/// (`data/launchers/torchtitan-0.3.0-options.txt`), the subcommand word last; with
/// `TRAINPLAN_LAUNCHER_TESTS=required`, torchtitan 0.3.0's own `ConfigManager` parses it
/// (`check_torchtitan03.py`, through `TRAINPLAN_PYTHON03`) and resolves the degrees, batch and
/// checkpointing the file says.
#[test]
fn every_torchtitan_0_3_option_written_is_one_it_freezes_and_its_parser_takes() {
    let known: BTreeSet<String> = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data/launchers/torchtitan-0.3.0-options.txt"),
    )
    .unwrap()
    .lines()
    .filter(|l| !l.is_empty() && !l.starts_with('#'))
    .map(String::from)
    .collect();
    let mut written = 0;
    for design in DESIGNS {
        let mut with = vec!["--torchtitan-version", "0.3"];
        with.extend_from_slice(design);
        let text = match exported("torchtitan", &with) {
            Ok(text) => text,
            // A refusal names the format asked for.
            Err(e) => {
                assert!(e.contains("--format = torchtitan-0.3"), "{design:?}: {e}");
                continue;
            }
        };
        written += 1;
        let words = torchtitan03_words(&text);
        assert_eq!(&words[..2], ["--module", "llama3"], "{text}");
        assert!(
            words.last().unwrap().starts_with("activation-checkpoint:"),
            "{text}"
        );
        let mut values = Vec::new();
        for pair in words[4..words.len() - 1].iter().enumerate() {
            let (i, w) = pair;
            let Some(name) = w.strip_prefix("--") else {
                continue;
            };
            let key = name.replace("no-", "");
            assert!(
                known.contains(&key),
                "{design:?}: {w} is not a torchtitan 0.3 option"
            );
            match words.get(4 + i + 1) {
                // A value: the next word, unless an option or the subcommand word.
                Some(v) if !v.starts_with("--") && 4 + i + 1 < words.len() - 1 => {
                    values.push((key, v.clone()))
                }
                // A switch: on, or off written `no-`.
                _ => values.push((key, (!name.contains("no-")).to_string())),
            }
        }
        if std::env::var("TRAINPLAN_LAUNCHER_TESTS").as_deref() != Ok("required") {
            continue;
        }
        let python = std::env::var("TRAINPLAN_PYTHON03").unwrap_or_else(|_| "python3".into());
        let mut args: Vec<String> = Vec::new();
        for (key, _) in &values {
            args.extend(["--print".into(), key.clone()]);
        }
        args.extend([
            "--print".into(),
            "activation_checkpoint".into(),
            "--".into(),
        ]);
        args.extend(words.iter().cloned());
        let out = Command::new(python)
            .arg(fixtures().join("check_torchtitan03.py"))
            .args(&args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "check_torchtitan03.py refused:\n{text}\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // What torchtitan resolved is what the file says.
        for (key, value) in &values {
            let want = if key == "compile.components" {
                format!(
                    "[{}]",
                    value
                        .split(',')
                        .map(|c| format!("\"{c}\""))
                        .collect::<Vec<_>>()
                        .join(",")
                )
            } else {
                value.clone()
            };
            assert!(
                stdout.lines().any(|l| l == format!("{key}={want}")),
                "{key}={want}:\n{stdout}"
            );
        }
        let ac = words
            .last()
            .unwrap()
            .trim_start_matches("activation-checkpoint:");
        let class = match ac {
            "selective" => "SelectiveAC.Config",
            "full" => "FullAC.Config",
            _ => "None",
        };
        assert!(
            stdout.contains(&format!("activation_checkpoint={class}")),
            "{stdout}"
        );
    }
    assert!(written >= 3, "only {written} designs exported");
}
