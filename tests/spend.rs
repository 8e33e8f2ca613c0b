//! What a run costs in money and energy, through the binary: GPU-hours, cost, energy and
//! emissions on every plan when the brief prices them, the cost limit as a fourth check that
//! bounds the token window, and `search --rank cost`.

mod common;

use common::{json, refuses, trainplan};

/// The contract's plan: 70B on 4.96 T tokens, TP 8, ZeRO 3, on the default brief's 2,048 GPUs.
const PLAN: [&str; 9] = [
    "check", "--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--zero", "3",
];

/// Its days by hand (SPEC.md §3): 6·N·D / (GPUs × peak × MFU × 86,400).
fn plan_days() -> f64 {
    let (n, d) = (70_553_706_496.0_f64, 4.96e12);
    6.0 * n * d / (2048.0 * 989e12 * 0.4 * 86_400.0)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs()
}

#[test]
fn a_price_gives_every_plan_its_gpu_hours_and_cost() {
    let plan = json(&[&PLAN[..], &["--price-per-gpu-hour", "2.5", "--json"]].concat());
    let spend = &plan["spend"];
    let hours = 2048.0 * 24.0 * plan_days();
    assert!(
        close(spend["gpu_hours"].as_f64().unwrap(), hours),
        "{spend}"
    );
    // 1,474,327.5 GPU-hours at 2.50: 3,685,818.8.
    assert!(close(spend["cost"].as_f64().unwrap(), 2.5 * hours));
    assert!((spend["cost"].as_f64().unwrap() - 3_685_818.84).abs() < 0.01);
    assert!(spend.get("energy_mwh").is_none() && spend.get("emissions_t").is_none());
    // No limit, no fourth check.
    assert!(plan["checks"].get("cost").is_none());
    let brief = json(&[
        "brief",
        "--print",
        "--format",
        "json",
        "--price-per-gpu-hour",
        "2.5",
    ]);
    assert_eq!(brief["spend"]["price_per_gpu_hour"], 2.5);
}

#[test]
fn a_power_a_pue_and_a_grid_give_energy_and_emissions() {
    let plan = json(
        &[
            &PLAN[..],
            &[
                "--gpu-power-w",
                "700",
                "--pue",
                "1.2",
                "--carbon-g-per-kwh",
                "400",
                "--json",
            ],
        ]
        .concat(),
    );
    let hours = 2048.0 * 24.0 * plan_days();
    let mwh = hours * 700.0 * 1.2 / 1e6;
    assert!(close(plan["spend"]["energy_mwh"].as_f64().unwrap(), mwh));
    assert!(close(
        plan["spend"]["emissions_t"].as_f64().unwrap(),
        mwh * 400.0 / 1e3
    ));
    assert!(plan["spend"].get("cost").is_none());
}

#[test]
fn the_default_brief_reports_no_spend_and_a_preset_its_board_power() {
    let plain = json(&[&PLAN[..], &["--json"]].concat());
    assert!(plain.get("spend").is_none());
    let default = json(&["brief", "--print", "--format", "json"]);
    assert!(default.get("spend").is_none() && default.get("max_cost").is_none());
    let h200 = json(&["brief", "--print", "--format", "json", "--gpu", "h200"]);
    assert_eq!(h200["spend"]["gpu_power_w"], 700.0);
    let plan = json(&[&PLAN[..], &["--gpu", "h200", "--json"]].concat());
    let hours = plan["spend"]["gpu_hours"].as_f64().unwrap();
    assert!(close(
        plan["spend"]["energy_mwh"].as_f64().unwrap(),
        hours * 700.0 / 1e6
    ));
}

#[test]
fn the_cost_limit_is_a_fourth_check_with_its_reason_and_fix() {
    let out = trainplan()
        .args(PLAN)
        .args(["--price-per-gpu-hour", "2.5", "--max-cost", "3e6"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("cost    3,685,819  ≤ 3,000,000  FAIL  685,819 over"),
        "{text}"
    );
    // 3,000,000 / (2,048 × 24 × 2.5) = 24.4 days: 4.96 T × 24.414 / 29.995 tokens.
    assert!(
        text.contains("cost: train at most 4.037 T tokens (4037094777099), the most the 3,000,000 cost limit (24.4 days) allows"),
        "{text}"
    );
    let plan = json(
        &[
            &PLAN[..],
            &["--price-per-gpu-hour", "2.5", "--max-cost", "3e6", "--json"],
        ]
        .concat(),
    );
    assert_eq!(plan["checks"]["cost"], false);
    assert!(!plan["pass"].as_bool().unwrap());
    assert!((plan["margins"]["cost"].as_f64().unwrap() + 685_818.84).abs() < 0.01);
    assert_eq!(
        plan["reasons"][0],
        "cost: 3,685,819 exceeds the 3,000,000 limit by 685,819"
    );
}

#[test]
fn the_cost_limit_ends_the_token_window_to_the_whole_token() {
    let brief = [
        "--models",
        "70b",
        "--price-per-gpu-hour",
        "2.5",
        "--max-cost",
        "3e6",
    ];
    let found = json(&[&["search"][..], &brief, &["--json"]].concat());
    let window = &found["shapes"][0]["token_window"];
    let hi = window[1].as_u64().expect("70B passes under the cost limit");
    assert!(
        hi < 4_960_000_000_000,
        "the cost limit binds before the days"
    );
    let plan = |tokens: u64| {
        let t = tokens.to_string();
        json(
            &[
                &[
                    "check", "--model", "70b", "--tp", "8", "--zero", "3", "--tokens", &t,
                ][..],
                &brief[2..],
                &["--json"],
            ]
            .concat(),
        )
    };
    assert_eq!(plan(hi)["checks"]["cost"], true);
    assert_eq!(plan(hi + 1)["checks"]["cost"], false);
    let text = String::from_utf8(
        trainplan()
            .args(["search"])
            .args(brief)
            .args(["--models", "405b", "-q"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        text.contains("spend     2.50 a GPU-hour, cost ≤ 3,000,000 (24.4 days on 2,048 GPUs)"),
        "{text}"
    );
    assert!(
        text.contains("never passes: cost: reaching loss 1.955 takes 817.7 B tokens (28.4 days), but the 3,000,000 cost limit allows 24.4 days"),
        "{text}"
    );
}

#[test]
fn search_ranks_by_cost_when_there_is_a_price() {
    let found = json(&[
        "search",
        "--rank",
        "cost",
        "--price-per-gpu-hour",
        "2.5",
        "--top",
        "8",
        "--distinct",
        "plan",
        "--json",
    ]);
    assert_eq!(found["rank"], "cost");
    let costs: Vec<f64> = found["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["spend"]["cost"].as_f64().unwrap())
        .collect();
    assert_eq!(costs.len(), 8);
    assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
    // The cheapest passing plan is the fastest: every layout holds the brief's 2,048 GPUs.
    let by_days = json(&["search", "--rank", "days", "--top", "1", "--json"]);
    assert_eq!(found["plans"][0]["days"], by_days["plans"][0]["days"]);
    let text = String::from_utf8(
        trainplan()
            .args([
                "search",
                "--rank",
                "cost",
                "--price-per-gpu-hour",
                "2.5",
                "-q",
            ])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        text.contains("by cost") && text.contains("      cost"),
        "{text}"
    );
}

#[test]
fn what_cannot_be_priced_is_refused_in_one_line() {
    refuses(
        &["search", "--rank", "cost"],
        "invalid --rank = cost: a brief with a price",
    );
    refuses(
        &[&PLAN[..], &["--max-cost", "1e6"]].concat(),
        "invalid brief.max_cost = 1000000: it needs a price",
    );
    refuses(
        &[&PLAN[..], &["--pue", "1.2"]].concat(),
        "invalid brief.spend.pue = 1.2: it needs a power",
    );
    refuses(
        &[&PLAN[..], &["--gpu-power-w", "700", "--pue", "0.9"]].concat(),
        "invalid brief.spend.pue = 0.9",
    );
    refuses(
        &[&PLAN[..], &["--price-per-gpu-hour", "-1"]].concat(),
        "invalid brief.spend.price_per_gpu_hour = -1",
    );
    refuses(
        &[&PLAN[..], &["--price-per-gpu-hour", "0"]].concat(),
        "invalid brief.spend.price_per_gpu_hour = 0",
    );
}

#[test]
fn a_brief_file_prices_the_run_and_refuses_what_it_does_not_know() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("priced.toml");
    std::fs::write(
        &good,
        "max_cost = 5e6\n[spend]\nprice_per_gpu_hour = 2.5\ngpu_power_w = 1275\n",
    )
    .unwrap();
    let plan = json(&[&PLAN[..], &["--brief", good.to_str().unwrap(), "--json"]].concat());
    assert_eq!(plan["checks"]["cost"], true);
    let hours = plan["spend"]["gpu_hours"].as_f64().unwrap();
    assert!(close(
        plan["spend"]["energy_mwh"].as_f64().unwrap(),
        hours * 1275.0 / 1e6
    ));
    // `brief --print` writes it back.
    let printed = trainplan()
        .args(["brief", "--print", "--brief", good.to_str().unwrap()])
        .output()
        .unwrap();
    let printed = String::from_utf8(printed.stdout).unwrap();
    assert!(
        printed.contains("max_cost = 5000000.0") && printed.contains("[spend]"),
        "{printed}"
    );
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[spend]\nprice = 2.5\n").unwrap();
    refuses(
        &[&PLAN[..], &["--brief", bad.to_str().unwrap()]].concat(),
        "price",
    );
}
