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
/// embeddings, sliding windows and other RoPE bases (Hugging Face configs).
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
];

/// The export of a design, or `None` when the launcher refuses it (by name, status 2).
fn export(format: &str, design: &[&str]) -> Option<String> {
    let out = trainplan()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["export", "-q", "--format", format])
        .args(design)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    match out.status.code() {
        Some(0 | 1) => Some(String::from_utf8(out.stdout).unwrap()),
        Some(2) => {
            assert_eq!(err.lines().count(), 1, "{design:?}: {err}");
            assert!(err.contains("--format"), "{design:?}: {err}");
            None
        }
        code => panic!("{design:?}: exit {code:?}: {err}"),
    }
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
    }
    assert!(exported >= 7, "only {exported} designs exported");
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
        let mut keys = BTreeSet::new();
        toml_keys(&text.parse::<toml::Value>().unwrap(), "", &mut keys);
        for key in keys {
            assert!(
                known.contains(&key),
                "{design:?}: {key} is not a torchtitan key"
            );
        }
        upstream_check("check_torchtitan.py", &text, "toml", &[]);
    }
    assert!(exported >= 4, "only {exported} designs exported");
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
