//! Snapshot tests of each output format: the real binary's output compared byte for byte with
//! files in `tests/snapshots/`, which were checked by hand against SPEC.md when written. After a
//! deliberate change of format, regenerate the files with
//! `TRAINPLAN_WRITE_RESULTS=1 cargo test --test snapshots` and review the diff.

mod common;

use common::trainplan;

fn snapshot(args: &[&str], file: &str) {
    let out = trainplan().args(args).output().unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(file);
    let got = String::from_utf8(out.stdout).unwrap();
    if std::env::var_os("TRAINPLAN_WRITE_RESULTS").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        got,
        expected,
        "{file} differs: trainplan {}",
        args.join(" ")
    );
}

#[test]
fn check_report_of_the_starting_plan() {
    snapshot(
        &["check", "--model", "70b", "--tokens", "15e12"],
        "check-start.txt",
    );
}

#[test]
fn check_json_of_a_passing_plan() {
    snapshot(
        &[
            "check", "--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--zero", "3", "--json",
        ],
        "check-pass.json",
    );
}

#[test]
fn check_json_of_a_failing_plan_carries_reasons_and_fixes() {
    snapshot(
        &[
            "check", "--model", "8b", "--tokens", "2e12", "--tp", "2", "--pp", "4", "--zero", "1",
            "--json",
        ],
        "check-8b-fail.json",
    );
}

#[test]
fn pareto_front_as_a_text_table() {
    snapshot(
        &[
            "search",
            "--models",
            "405b",
            "--pareto",
            "-",
            "--pareto-format",
            "text",
        ],
        "front-405b.txt",
    );
}

#[test]
fn check_report_of_llama_3_405b_under_the_detailed_model() {
    snapshot(
        &[
            "check",
            "--model",
            "405b",
            "--tokens",
            "15.6e12",
            "--tp",
            "8",
            "--pp",
            "16",
            "--zero",
            "2",
            "--gpus",
            "8192",
            "--memory-cap-gb",
            "80",
            "--memory",
            "detailed",
            "--stages",
            "llama3",
            "--recompute",
            "none",
            "--tp-comm-overlap",
            "off",
        ],
        "check-405b-detailed.txt",
    );
}

#[test]
fn check_report_of_70b_under_the_detailed_time_model() {
    snapshot(
        &[
            "check",
            "--model",
            "70b",
            "--tokens",
            "4e12",
            "--tp",
            "8",
            "--pp",
            "4",
            "--zero",
            "1",
            "--memory",
            "detailed",
            "--schedule",
            "interleaved:2",
            "--recompute",
            "selective",
            "--time",
            "detailed",
        ],
        "check-70b-time.txt",
    );
}

/// The guide's walk-through (docs/guide.md): three Hugging Face configs on H200s under the detailed models.
const CONFIGS_ON_H200: [&str; 13] = [
    "--model-config",
    "tests/fixtures/hf/llama-3.1-70b/config.json",
    "--model-config",
    "tests/fixtures/hf/qwen2.5-7b/config.json",
    "--model-config",
    "tests/fixtures/hf/mistral-nemo-base-2407/config.json",
    "--gpu",
    "h200",
    "--memory",
    "detailed",
    "--time",
    "detailed",
    "-q",
];

#[test]
fn a_search_of_hugging_face_configs_on_h200s() {
    let mut args = vec!["search"];
    args.extend(CONFIGS_ON_H200);
    args.extend(["--top", "3"]);
    snapshot(&args, "search-configs-h200.txt");
}

#[test]
fn launcher_configurations_of_the_walk_through_s_best_plan() {
    let dir = tempfile::tempdir().unwrap();
    let plans = dir.path().join("plans.json");
    let mut search = vec!["search"];
    search.extend(CONFIGS_ON_H200);
    search.push("--json");
    let out = trainplan()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(&search)
        .output()
        .unwrap();
    std::fs::write(&plans, out.stdout).unwrap();
    // The best plan has CP 2, which DeepSpeed's config cannot say: its JSON is the second's.
    for (format, index, file) in [
        ("megatron", "1", "export-megatron.txt"),
        ("deepspeed", "2", "export-deepspeed.json"),
        ("torchtitan", "1", "export-torchtitan.toml"),
    ] {
        snapshot(
            &[
                "-q",
                "export",
                "--plan",
                plans.to_str().unwrap(),
                "--index",
                index,
                "--format",
                format,
                "--model-config",
                "tests/fixtures/hf/llama-3.1-70b/config.json",
            ],
            file,
        );
    }
}

#[test]
fn the_h200_brief_printed_as_toml() {
    snapshot(&["brief", "--print", "--gpu", "h200"], "brief-h200.toml");
}

#[test]
fn the_top_plans_as_a_markdown_table() {
    snapshot(
        &["search", "--format", "markdown", "--top", "5"],
        "search-top5.md",
    );
}

#[test]
fn check_sensitivity_under_the_plate() {
    snapshot(
        &[
            "check",
            "--model",
            "70b",
            "--tokens",
            "4.96e12",
            "--tp",
            "8",
            "--zero",
            "3",
            "--sensitivity",
        ],
        "check-sensitivity.txt",
    );
}

#[test]
fn search_sensitivity_of_the_detailed_search_on_4096_gpus() {
    snapshot(
        &[
            "search",
            "--gpus",
            "4096",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--top",
            "3",
            "--sensitivity",
        ],
        "search-4096-sensitivity.txt",
    );
}

#[test]
fn the_detailed_search_on_1536_gpus_finds_70b_at_the_batch_nearest_16_mi() {
    snapshot(
        &[
            "search",
            "--gpus",
            "1536",
            "--detailed",
            "--models",
            "70b",
            "--top",
            "3",
            "-q",
        ],
        "search-1536.txt",
    );
}

#[test]
fn a_megatron_export_of_llama_3_70b() {
    snapshot(
        &[
            "export", "--format", "megatron", "--model", "70b", "--tokens", "4.96e12", "--tp", "8",
            "--pp", "8", "--zero", "1", "-q",
        ],
        "export-70b-megatron.txt",
    );
}

#[test]
fn a_131072_token_405b_run_on_16384_gpus_says_why_cp_1_fails() {
    snapshot(
        &[
            "search",
            "--gpus",
            "16384",
            "--seq-len",
            "131072",
            "--models",
            "405b",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--max-days",
            "90",
            "--top",
            "3",
        ],
        "search-131k-cp.txt",
    );
}

#[test]
fn an_fp8_search_says_what_fp8_buys_over_bf16() {
    snapshot(
        &[
            "search",
            "--models",
            "70b,405b",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--precisions",
            "bf16,fp8",
            "--top",
            "3",
        ],
        "search-fp8.txt",
    );
}

#[test]
fn what_the_walk_through_s_plan_costs_with_a_price_a_power_and_a_limit() {
    snapshot(
        &[
            "check",
            "--model",
            "70b",
            "--tokens",
            "4.96e12",
            "--tp",
            "1",
            "--pp",
            "1",
            "--zero",
            "3",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--price-per-gpu-hour",
            "2.5",
            "--gpu-power-w",
            "1275",
            "--pue",
            "1.2",
            "--carbon-g-per-kwh",
            "400",
            "--max-cost",
            "4e6",
        ],
        "check-70b-cost.txt",
    );
}

#[test]
fn a_search_ranked_by_cost_under_a_cost_limit() {
    snapshot(
        &[
            "search",
            "--rank",
            "cost",
            "--price-per-gpu-hour",
            "2.5",
            "--max-cost",
            "3e6",
            "--gpu-power-w",
            "700",
            "--top",
            "3",
        ],
        "search-cost.txt",
    );
}
