//! At the edges: a 10-trillion-parameter model on a million GPUs, token counts up to 2^64 − 1,
//! the largest brief the limits allow. Counts stay exact (integers wide enough), nothing
//! overflows or panics, and the numbers agree with values worked out by hand (Python, exact
//! integers) at these sizes.

mod common;

use common::trainplan;

use serde_json::Value;

fn run(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = trainplan().args(args).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code(),
        json,
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// L = 256, h = 57,344 (448 heads of 128), f = 4h, 8 KV heads, Llama 3's vocabulary: by hand,
/// 46,154,235,904 parameters a layer and 11,830,193,872,896 in all (11.8 T).
const TEN_T: [&str; 14] = [
    "--layers",
    "256",
    "--hidden",
    "57344",
    "--ffn",
    "229376",
    "--heads",
    "448",
    "--kv-heads",
    "8",
    "--vocab",
    "128256",
    "--gpus",
    "1048576",
];

#[test]
fn a_ten_trillion_parameter_model_on_a_million_gpus_is_counted_exactly() {
    let mut args = vec![
        "check", "--json", "--tokens", "1e15", "--tp", "8", "--pp", "256", "--zero", "1",
    ];
    args.extend(TEN_T);
    let (code, plan, stderr) = run(&args);
    assert!(matches!(code, Some(0 | 1)), "{stderr}");
    assert_eq!(plan["params"], 11_830_193_872_896u64);
    assert_eq!(plan["layout"]["dp"], 512);
    // Weights 2Ψ with Ψ = N / (TP·PP): 11.552923704 GB; the optimizer 12Ψ / DP under ZeRO 1.
    let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() <= 1e-9 * want;
    assert!(close(&plan["memory_gb"]["weights"], 11.552_923_704));
    assert!(close(&plan["memory_gb"]["optimizer"], 0.135_385_824_656_25));
    // 6ND / (2^20 × 989e12 × 0.4 × 86,400) = 1,980.49237 days.
    assert!(close(&plan["days"], 1_980.492_370_008_9));
}

#[test]
fn a_search_over_a_million_gpus_and_the_whole_token_range_stays_bounded() {
    let mut args = vec![
        "search",
        "--json",
        "--tokens-min",
        "1e12",
        "--tokens-max",
        "100000000000000000",
        "--tokens-step",
        "1e12",
        "--max-days",
        "36500",
        "--top",
        "3",
    ];
    args.extend(TEN_T);
    let (code, report, stderr) = run(&args);
    assert!(matches!(code, Some(0 | 1)), "{stderr}");
    assert_eq!(report["shapes"][0]["params"], 11_830_193_872_896u64);
    // 100,000 token counts × every layout of 2^20 GPUs: counted, not wrapped.
    assert!(report["evaluated"].as_u64().unwrap() >= 100_000);
}

#[test]
fn token_counts_up_to_the_largest_whole_number_do_not_overflow() {
    let max = u64::MAX.to_string();
    for command in [
        vec![
            "check",
            "--json",
            "--model",
            "70b",
            "--tp",
            "8",
            "--zero",
            "3",
            "--tokens",
            max.as_str(),
        ],
        vec![
            "export",
            "--format",
            "megatron",
            "--model",
            "70b",
            "--tp",
            "8",
            "--zero",
            "3",
            "--tokens",
            max.as_str(),
        ],
    ] {
        let (code, _, stderr) = run(&command);
        assert!(matches!(code, Some(0 | 1)), "{command:?}: {stderr}");
    }
    let (_, plan, _) = run(&["check", "--json", "--model", "70b", "--tokens", &max]);
    assert_eq!(plan["tokens"].as_u64(), Some(u64::MAX));
    assert_eq!(plan["checks"]["days"], false);
}

#[test]
fn the_largest_brief_the_limits_allow_is_answered() {
    let (code, report, stderr) = run(&[
        "search",
        "--json",
        "--gpus",
        "100000000",
        "--peak-tflops",
        "1000000",
        "--max-days",
        "36500",
        "--gpus-per-node",
        "1024",
        "--top",
        "1",
    ]);
    assert!(matches!(code, Some(0 | 1)), "{stderr}");
    assert!(report["budget_flops"].as_f64().unwrap().is_finite());
}
