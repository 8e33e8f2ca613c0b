//! What engineers already have, in; what they paste next, out: Hugging Face configs, GPU
//! presets, TOML briefs, launcher configurations, tables and plots — through the real binary.

use assert_cmd::Command;
use serde_json::Value;

fn trainplan() -> Command {
    Command::cargo_bin("trainplan").unwrap()
}

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/hf/{name}/config.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn stdout(args: &[&str]) -> String {
    let out = trainplan().args(args).output().unwrap();
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs with `args`, expects exit status 2 and one line on stderr containing `needle`.
fn refuses(args: &[&str], needle: &str) {
    let out = trainplan().args(args).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} lacks {needle:?}"
    );
}

#[test]
fn check_grades_a_model_from_its_config() {
    let config = fixture("llama-3.2-3b");
    let plan: Value = serde_json::from_str(&stdout(&[
        "check",
        "--model-config",
        &config,
        "--tokens",
        "1e12",
        "--json",
    ]))
    .unwrap();
    assert_eq!(plan["model"], "llama-3.2-3b");
    assert_eq!(plan["params"], 3_212_749_824u64);
}

#[test]
fn a_config_s_shape_grades_as_the_preset_it_equals() {
    let by_config = stdout(&[
        "check",
        "--model-config",
        &fixture("llama-3.1-70b"),
        "--tokens",
        "4.96e12",
        "--tp",
        "8",
        "--pp",
        "8",
        "--zero",
        "1",
        "--json",
    ]);
    let by_name = stdout(&[
        "check", "--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--pp", "8", "--zero", "1",
        "--json",
    ]);
    let strip = |s: &str| s.replace("\"llama-3.1-70b\"", "\"llama3-70b\"");
    assert_eq!(strip(&by_config), by_name);
}

#[test]
fn search_takes_several_configs_together() {
    let report: Value = serde_json::from_str(&stdout(&[
        "search",
        "--model-config",
        &fixture("qwen2.5-7b"),
        "--model-config",
        &fixture("llama-3.1-70b"),
        "--json",
    ]))
    .unwrap();
    let models: Vec<&str> = report["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["qwen2.5-7b", "llama-3.1-70b"]);
    assert_eq!(report["plans"][0]["model"], "llama-3.1-70b");
}

#[test]
fn an_ad_hoc_shape_is_named_so_check_reads_the_name_back() {
    let adhoc: Value = serde_json::from_str(&stdout(&[
        "check",
        "--layers",
        "40",
        "--hidden",
        "5120",
        "--ffn",
        "14336",
        "--heads",
        "32",
        "--head-dim",
        "128",
        "--vocab",
        "131072",
        "--tokens",
        "1e12",
        "--json",
    ]))
    .unwrap();
    let name = adhoc["model"].as_str().unwrap();
    assert_eq!(name, "L40-h5120-f14336-a32-d128-v131072");
    // Mistral NeMo's dimensions: its published count.
    assert_eq!(adhoc["params"], 12_247_782_400u64);
    let by_name: Value = serde_json::from_str(&stdout(&[
        "check", "--model", name, "--tokens", "1e12", "--json",
    ]))
    .unwrap();
    assert_eq!(by_name, adhoc);
    let search: Value = serde_json::from_str(&stdout(&[
        "search",
        "--layers",
        "40",
        "--hidden",
        "5120",
        "--ffn",
        "14336",
        "--heads",
        "32",
        "--head-dim",
        "128",
        "--vocab",
        "131072",
        "--json",
    ]))
    .unwrap();
    assert_eq!(search["shapes"][0]["model"], name);
}

#[test]
fn models_that_cannot_be_planned_are_refused_by_name() {
    refuses(
        &[
            "check",
            "--model-config",
            &fixture("mixtral-8x7b-v0.1"),
            "--tokens",
            "1e12",
        ],
        "mixture-of-experts model (num_local_experts = 8)",
    );
    refuses(
        &["search", "--model-config", &fixture("gemma-2b")],
        "architecture GemmaForCausalLM is not supported",
    );
    refuses(
        &[
            "check",
            "--model-config",
            "/no/such/config.json",
            "--tokens",
            "1e12",
        ],
        "cannot read '/no/such/config.json'",
    );
    refuses(
        &["check", "--tokens", "1e12"],
        "one of --model, --model-config",
    );
    refuses(
        &[
            "check", "--layers", "4", "--hidden", "100", "--ffn", "300", "--tokens", "1e12",
        ],
        "--hidden = 100",
    );
    refuses(
        &[
            "search", "--layers", "4..8", "--hidden", "1024", "--ffn", "300",
        ],
        "--layers = 4..8",
    );
}

#[test]
fn the_printed_brief_reads_back_as_itself_in_toml_and_json() {
    let dir = tempfile::tempdir().unwrap();
    for (format, file) in [("toml", "brief.toml"), ("json", "brief.json")] {
        let printed = stdout(&[
            "brief", "--print", "--format", format, "--gpu", "h200", "--gpus", "512",
        ]);
        let path = dir.path().join(file);
        std::fs::write(&path, &printed).unwrap();
        let again = stdout(&[
            "brief",
            "--print",
            "--format",
            format,
            "--brief",
            path.to_str().unwrap(),
        ]);
        assert_eq!(again, printed, "{format}");
    }
    // The JSON print is the `brief` object every JSON output carries.
    let printed: Value =
        serde_json::from_str(&stdout(&["brief", "--print", "--format", "json"])).unwrap();
    let report: Value = serde_json::from_str(&stdout(&["search", "--json"])).unwrap();
    assert_eq!(printed, report["brief"]);
}

#[test]
fn a_gpu_preset_sets_the_card_and_flags_still_override_it() {
    let brief = |args: &[&str]| -> Value {
        let mut all = vec!["brief", "--print", "--format", "json"];
        all.extend_from_slice(args);
        serde_json::from_str(&stdout(&all)).unwrap()
    };
    let h200 = brief(&["--gpu", "h200"]);
    assert_eq!(h200["peak_tflops"], 989.0);
    assert_eq!(h200["gpu_memory_gb"], 141.0);
    assert_eq!(h200["memory_cap_gb"], 141.0 * 0.9);
    assert_eq!(h200["topology"]["hbm_gbps"], 4800.0);
    assert_eq!(h200["gpus"], 2048, "the cluster's size is not the card's");
    let overridden = brief(&["--gpu", "b200", "--memory-cap-gb", "150"]);
    assert_eq!(overridden["peak_tflops"], 2250.0);
    assert_eq!(overridden["memory_cap_gb"], 150.0);
    // H100 SXM is the default brief's card.
    assert_eq!(brief(&["--gpu", "h100"]), brief(&[]));
}

#[test]
fn a_toml_brief_and_its_gpu_come_before_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("cluster.toml");
    std::fs::write(
        &toml,
        "gpu = \"mi300x\"\ngpus = 1024\npeak_tflops = 1000\n\n[loss_law]\ne = 1.8\n",
    )
    .unwrap();
    let json = dir.path().join("cluster.json");
    std::fs::write(
        &json,
        r#"{"gpu": "mi300x", "gpus": 1024, "peak_tflops": 1000, "loss_law": {"e": 1.8}}"#,
    )
    .unwrap();
    let from = |path: &std::path::Path, extra: &[&str]| -> Value {
        let mut args = vec![
            "brief",
            "--print",
            "--format",
            "json",
            "--brief",
            path.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        serde_json::from_str(&stdout(&args)).unwrap()
    };
    let brief = from(&toml, &[]);
    assert_eq!(brief, from(&json, &[]));
    // The file's own numbers lie over its GPU; the flags over both.
    assert_eq!(brief["peak_tflops"], 1000.0);
    assert_eq!(brief["gpu_memory_gb"], 192.0);
    assert_eq!(brief["loss_law"]["e"], 1.8);
    assert_eq!(brief["loss_law"]["a"], 482.0);
    let flagged = from(&toml, &["--gpu", "a100-40gb", "--gpus", "64"]);
    assert_eq!(flagged["peak_tflops"], 312.0);
    assert_eq!(flagged["gpus"], 64);
    // A search reads the same brief.
    let report: Value = serde_json::from_str(&stdout(&[
        "search",
        "--json",
        "--brief",
        toml.to_str().unwrap(),
    ]))
    .unwrap();
    assert_eq!(report["brief"], brief);
}
