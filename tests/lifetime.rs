//! Sizing a model for the inference it will serve (`--inference-tokens`, `--rank lifetime`;
//! Sardana et al. 2024) from the command line: the lifetime-optimal line beside the
//! compute-optimal one, plans ranked by training plus inference FLOPs, and how the answer
//! moves on the default brief as the tokens served grow (`results/lifetime.md`).

mod common;

use common::{generated_sections, json, trainplan};
use trainplan::laws::lifetime_optimal;
use trainplan::Brief;

/// A family of 110 shapes around the default brief's answer: 24 to 96 layers, widths of
/// 4,096 to 12,288.
fn family() -> Vec<&'static str> {
    vec![
        "search",
        "--layers",
        "24..96:8",
        "--hidden",
        "4096..12288:1024",
        "--ffn-ratio",
        "3.5..3.5:0.5",
        "--distinct",
        "shape",
    ]
}

fn ranked(inference: &str, rank: &str) -> serde_json::Value {
    let mut args = family();
    args.extend(["--inference-tokens", inference, "--rank", rank, "--json"]);
    json(&args)
}

/// Lifetime FLOPs of a plan of the JSON document.
fn lifetime(plan: &serde_json::Value) -> f64 {
    let l = &plan["lifetime"];
    l["train_flops"].as_f64().unwrap() + l["inference_flops"].as_f64().unwrap()
}

#[test]
fn the_search_reports_the_lifetime_optimal_line_of_its_brief() {
    let doc = ranked("2e13", "loss");
    let line = &doc["lifetime_optimal"];
    let want = lifetime_optimal(&Brief::default().loss_law, 1.955, 2e13).unwrap();
    assert_eq!(line["params"].as_f64().unwrap(), want.params);
    assert_eq!(line["tokens"].as_f64().unwrap(), want.tokens);
    // 6·N·D and 2·N·D_inf.
    let (n, d) = (want.params, want.tokens);
    assert!((line["train_flops"].as_f64().unwrap() / (6.0 * n * d) - 1.0).abs() < 1e-12);
    assert!((line["inference_flops"].as_f64().unwrap() / (2.0 * n * 2e13) - 1.0).abs() < 1e-12);
    // Without inference tokens, no line and no plan lifetime.
    let mut plain = family();
    plain.push("--json");
    let plain = json(&plain);
    assert!(plain.get("lifetime_optimal").is_none());
    assert!(plain["plans"][0].get("lifetime").is_none());
}

#[test]
fn rank_lifetime_puts_first_the_shape_of_least_training_plus_inference_flops() {
    for inference in ["1e12", "2e13"] {
        let doc = ranked(inference, "lifetime");
        let plans = doc["plans"].as_array().unwrap();
        // One row a shape, least lifetime FLOPs first.
        for pair in plans.windows(2) {
            assert!(lifetime(&pair[0]) <= lifetime(&pair[1]));
        }
    }
    // Serving more moves the first shape to a smaller model trained on more tokens, and
    // ranking by days alone does not find it.
    let few = ranked("1e12", "lifetime");
    let many = ranked("2e13", "lifetime");
    let first = |d: &serde_json::Value| {
        let p = &d["plans"][0];
        (p["params"].as_f64().unwrap(), p["tokens"].as_f64().unwrap())
    };
    let (n_few, d_few) = first(&few);
    let (n_many, d_many) = first(&many);
    assert!(n_many < n_few && d_many > d_few, "{n_few} {n_many}");
    let by_days = ranked("2e13", "days");
    assert!(lifetime(&many["plans"][0]) < lifetime(&by_days["plans"][0]));
    // The first shape is near the lifetime-optimal size the law gives (48.5 B at 2e13):
    // the family's widths step by 1,024.
    let line = many["lifetime_optimal"]["params"].as_f64().unwrap();
    assert!((n_many / line - 1.0).abs() < 0.1, "{n_many} against {line}");
}

#[test]
fn ranking_by_lifetime_needs_the_tokens_served() {
    let out = trainplan()
        .args(["search", "--rank", "lifetime"])
        .assert()
        .failure();
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains("--rank") && err.contains("--inference-tokens"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
}

/// The default brief's loss target (1.955 under its law), served more and more: the model of
/// least lifetime FLOPs, against the compute-optimal one for that loss.
fn sweep() -> String {
    let brief = Brief::default();
    let plain = lifetime_optimal(&brief.loss_law, brief.loss_target, 0.0).unwrap();
    let mut out = String::from(
        "| tokens served | parameters | training tokens | tokens a parameter | training FLOPs | inference FLOPs | compute-optimal model's lifetime FLOPs, more by |\n|---|---|---|---|---|---|---|\n",
    );
    for d_inf in [0.0, 1e11, 1e12, 1e13, 1e14, 1e15] {
        let l = lifetime_optimal(&brief.loss_law, brief.loss_target, d_inf).unwrap();
        let chin = trainplan::laws::Lifetime::of(plain.params, plain.tokens, d_inf);
        out.push_str(&format!(
            "| {} | {:.1} B | {:.2} T | {:.0} | {:.2e} | {:.2e} | {:.1} % |\n",
            if d_inf == 0.0 {
                "none".to_string()
            } else {
                format!("{d_inf:.0e}")
            },
            l.params / 1e9,
            l.tokens / 1e12,
            l.tokens / l.params,
            l.train_flops,
            l.inference_flops,
            (chin.total_flops() / l.total_flops() - 1.0) * 100.0
        ));
    }
    out
}

#[test]
fn the_lifetime_table_is_current() {
    generated_sections(
        "results/lifetime.md",
        "tests/lifetime.rs",
        &[("sweep", sweep())],
    );
}
