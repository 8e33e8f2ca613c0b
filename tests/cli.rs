//! The real binary, run as a user would: exit codes, output on the right stream, the JSON
//! contract, and one clear error line for bad input.

mod common;

use common::{json, refuses, trainplan};
use predicates::prelude::*;
use serde_json::Value;

#[test]
fn check_of_the_starting_plan_fails_memory_and_days_with_exit_1() {
    trainplan()
        .args([
            "check", "--model", "70b", "--tokens", "15e12", "--tp", "1", "--pp", "1", "--zero", "0",
        ])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "memory  1,139.60 GB  ≤ 72 GB  FAIL",
        ))
        .stdout(predicate::str::contains(
            "days         90.712     ≤ 30  FAIL",
        ))
        .stdout(predicate::str::contains("PASS  0.0228 to spare"))
        .stdout(predicate::str::contains("memory: raise ZeRO to stage 3"));
}

#[test]
fn check_of_a_passing_plan_exits_0() {
    trainplan()
        .args([
            "check", "--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--zero", "3",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("PASS: every check passes"));
}

#[test]
fn check_json_is_the_plan_object_of_the_contract() {
    let v = json(&[
        "check", "--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--pp", "1", "--zero", "3",
        "--json",
    ]);
    assert_eq!(v["model"], "llama3-70b");
    assert_eq!(v["params"], 70_553_706_496u64);
    assert_eq!(v["tokens"], 4_960_000_000_000u64);
    assert_eq!(
        v["layout"],
        serde_json::json!({"tp": 8, "cp": 1, "pp": 1, "dp": 256, "zero": 3, "replicate": 1})
    );
    for k in ["weights", "gradients", "optimizer", "activations", "total"] {
        assert!(v["memory_gb"][k].is_f64(), "memory_gb.{k}");
    }
    assert_eq!(
        v["checks"],
        serde_json::json!({"memory": true, "days": true, "loss": true})
    );
    assert_eq!(v["pass"], true);
    assert!(v["flops"].as_f64().unwrap() > 2.09e24);
    assert!(v["days"].as_f64().unwrap() < 30.0);
    assert!(v["loss"].as_f64().unwrap() < 1.955);
}

#[test]
fn search_answers_the_default_brief() {
    trainplan()
        .arg("search")
        .assert()
        .success()
        .stdout(predicate::str::contains("budget    2.10e24 FLOPs"))
        .stdout(predicate::str::contains("optimum   140.4 B parameters"))
        .stdout(predicate::str::contains(
            "llama3-8b     8.03 B  never passes: loss",
        ))
        .stdout(predicate::str::contains(
            "passes on 3.381 T – 4.961 T tokens (20.4 – 30.0 days)",
        ))
        .stdout(predicate::str::contains(
            "passes on 817.7 B – 862.4 B tokens (28.4 – 30.0 days)",
        ));
}

#[test]
fn search_json_follows_the_contract() {
    let v = json(&["search", "--json", "--top", "3"]);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["brief"]["gpus"], 2048);
    assert_eq!(v["brief"]["loss_law"]["alpha"], 0.348);
    assert!((v["budget_flops"].as_f64().unwrap() - 2.1e24).abs() < 1e21);
    assert!(v["compute_optimal"]["params"].as_u64().unwrap() > 139_000_000_000);
    let shapes = v["shapes"].as_array().unwrap();
    assert_eq!(shapes.len(), 3);
    assert_eq!(shapes[0]["token_window"], Value::Null);
    assert!(shapes[0]["reason"].as_str().unwrap().starts_with("loss"));
    assert_eq!(
        shapes[1]["token_window"],
        serde_json::json!([3_380_993_485_052u64, 4_960_782_062_099u64])
    );
    assert_eq!(shapes[1]["reason"], Value::Null);
    assert_eq!(v["plans"].as_array().unwrap().len(), 3);
    assert_eq!(v["plans"][0]["pass"], true);
}

#[test]
fn search_all_lists_every_passing_plan() {
    let v = json(&[
        "search",
        "--json",
        "--all",
        "--distinct",
        "plan",
        "--models",
        "405b",
    ]);
    let plans = v["plans"].as_array().unwrap();
    assert_eq!(plans.len() as u64, v["passing"].as_u64().unwrap());
    assert!(plans.len() > 10);
    // By default a row is a distinct layout and step: every one of them, each once.
    let v = json(&["search", "--json", "--all", "--models", "405b"]);
    let plans = v["plans"].as_array().unwrap();
    assert_eq!(v["distinct"], "layout");
    assert_eq!(plans.len() as u64, v["choices"].as_u64().unwrap());
    let layouts: std::collections::BTreeSet<String> =
        plans.iter().map(|p| p["layout"].to_string()).collect();
    assert_eq!(layouts.len(), plans.len());
}

#[test]
fn ranking_by_days_puts_the_fastest_first() {
    let v = json(&["search", "--json", "--rank", "days"]);
    let days: Vec<f64> = v["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["days"].as_f64().unwrap())
        .collect();
    assert!(days.windows(2).all(|w| w[0] <= w[1]));
    // The fastest passing plan is 70B at the first grid point past 3.381e12 tokens.
    assert_eq!(v["plans"][0]["tokens"], 3_390_000_000_000u64);
}

#[test]
fn pareto_to_stdout_is_the_only_thing_on_stdout() {
    let out = trainplan()
        .args(["search", "--pareto", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["objectives"], serde_json::json!(["loss", "days"]));
    let front = v["front"].as_array().unwrap();
    assert_eq!(front.len(), 158);
    let days: Vec<f64> = front.iter().map(|p| p["days"].as_f64().unwrap()).collect();
    assert!(days.windows(2).all(|w| w[0] < w[1]));
    assert!(String::from_utf8(out.stderr).unwrap().contains("budget"));
}

#[test]
fn pareto_to_a_file_replaces_it_and_keeps_the_summary_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("front.json");
    std::fs::write(&path, "old").unwrap();
    trainplan()
        .args(["search", "--pareto"])
        .arg(&path)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "pareto front (loss, days): 158 plans",
        ));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["front"].as_array().unwrap().len(), 158);
}

#[test]
fn a_brief_file_sets_fields_and_flags_override_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("brief.json");
    std::fs::write(
        &path,
        r#"{"gpus": 4096, "max_days": 20, "loss_law": {"e": 1.8}}"#,
    )
    .unwrap();
    let v = json(&[
        "search",
        "--json",
        "--brief",
        path.to_str().unwrap(),
        "--max-days",
        "25",
    ]);
    assert_eq!(v["brief"]["gpus"], 4096);
    assert_eq!(v["brief"]["max_days"], 25.0);
    assert_eq!(v["brief"]["loss_law"]["e"], 1.8);
    assert_eq!(v["brief"]["mfu"], 0.4);
}

#[test]
fn the_brief_in_the_output_reads_back_as_a_brief_file() {
    let dir = tempfile::tempdir().unwrap();
    let v = json(&[
        "search",
        "--json",
        "--gpus",
        "512",
        "--loss-law",
        "hoffmann",
    ]);
    let path = dir.path().join("brief.json");
    std::fs::write(&path, v["brief"].to_string()).unwrap();
    let mut again = json(&["search", "--json", "--brief", path.to_str().unwrap()]);
    // The plans' commands name the brief as it was given: its flags, or the file.
    let mut v = v;
    for (doc, brief) in [(&mut v, "--gpus"), (&mut again, "--brief")] {
        for plan in doc["plans"].as_array_mut().unwrap() {
            let check = plan.as_object_mut().unwrap().remove("check").unwrap();
            assert!(check.as_array().unwrap().iter().any(|a| a == brief));
        }
    }
    assert_eq!(again, v);
}

#[test]
fn the_pareto_file_may_not_overwrite_the_brief() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("brief.json");
    std::fs::write(&path, "{}").unwrap();
    let p = path.to_str().unwrap();
    refuses(&["search", "--brief", p, "--pareto", p], "--pareto");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}");
}

#[test]
fn bad_input_gets_one_error_line_and_exit_2() {
    let check = |extra: &[&str]| {
        let mut a = vec!["check", "--model", "70b", "--tokens", "1e12"];
        a.extend_from_slice(extra);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (check(&["--mfu", "-0.4"]), "brief.mfu = -0.4"),
        (check(&["--mfu", "NaN"]), "brief.mfu = NaN"),
        (check(&["--gpus", "0"]), "brief.gpus = 0"),
        (check(&["--tp", "3"]), "tp = 3"),
        (check(&["--pp", "81"]), "pp = 81"),
        (check(&["--zero", "4"]), "--zero"),
        (
            check(&["--memory-cap-gb", "100"]),
            "brief.memory_cap_gb = 100",
        ),
        (
            check(&["--brief", "/nonexistent/brief.json"]),
            "cannot read '/nonexistent/brief.json'",
        ),
        (
            vec![
                "check".into(),
                "--model".into(),
                "13b".into(),
                "--tokens".into(),
                "1e12".into(),
            ],
            "unknown model '13b'",
        ),
        (
            vec![
                "check".into(),
                "--model".into(),
                "70b".into(),
                "--tokens".into(),
                "1.5".into(),
            ],
            "--tokens",
        ),
        (
            vec!["check".into(), "--model".into(), "70b".into()],
            "--tokens",
        ),
        (
            vec!["search".into(), "--top".into(), "0".into()],
            "--top = 0",
        ),
        (
            vec!["search".into(), "--tokens-step".into(), "0".into()],
            "--tokens-step = 0",
        ),
        (
            vec!["search".into(), "--rank".into(), "speed".into()],
            "speed",
        ),
        (
            vec![
                "search".into(),
                "--pareto".into(),
                "-".into(),
                "--json".into(),
            ],
            "--pareto",
        ),
        (vec!["frobnicate".into()], "frobnicate"),
        (vec![], "a command is needed"),
        (
            vec!["search".into(), "--threads".into(), "5000".into()],
            "--threads = 5000",
        ),
        (
            vec!["search".into(), "--gpus-per-node".into(), "1e10".into()],
            "brief.gpus_per_node = 10000000000",
        ),
        (
            vec!["search".into(), "--gpus".into(), "1e19".into()],
            "--gpus",
        ),
        (
            vec!["search".into(), "--peak-tflops".into(), "1e308".into()],
            "brief.peak_tflops = 1e308",
        ),
        (
            vec!["search".into(), "--mfu".into(), "1e-300".into()],
            "invalid brief = a budget of",
        ),
        (
            vec!["search".into(), "--models".into(), "7b\nx".into()],
            "unknown model '7b\\nx'",
        ),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refuses(&args, needle);
    }
}

#[test]
fn a_malformed_or_mistyped_brief_file_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, needle) in [
        ("broken.json", "{\"gpus\": ", "cannot parse"),
        ("typo.json", "{\"gpux\": 8}", "gpux: unknown field `gpux`"),
        ("gpu.json", "{\"gpu\": 8}", "gpu: invalid type: integer `8`"),
        (
            "nested.json",
            "{\"topology\": {\"hbm_gbps\": \"x\"}}",
            "topology.hbm_gbps: invalid type",
        ),
        ("broken.toml", "gpus = [", "expected `]` at line 1 column 9"),
        (
            "typo.toml",
            "[loss_law]\nalfa = 0.3",
            "loss_law.alfa: unknown field `alfa`",
        ),
        (
            "unknown.toml",
            "gpu = \"h300\"",
            "gpu: invalid gpu = h300: one of a100-40gb",
        ),
        ("string.json", "{\"gpus\": \"many\"}", "invalid type"),
        ("empty.json", "", "cannot parse"),
        ("zero.json", "{\"gpus\": 0}", "brief.gpus = 0"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        refuses(&["search", "--brief", path.to_str().unwrap()], needle);
    }
}

#[test]
fn a_target_just_above_the_floor_is_told_it_needs_too_many_tokens_not_a_lower_floor() {
    trainplan()
        .args(["search", "--loss-target", "1.901", "--models", "70b"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "never passes: days: reaching loss 1.901 takes 4.405e19 tokens",
        ));
}

#[test]
fn a_huge_top_k_lists_every_passing_plan() {
    let v = json(&[
        "search",
        "--json",
        "--top",
        "9223372036854775808",
        "--distinct",
        "plan",
        "--models",
        "405b",
    ]);
    assert_eq!(
        v["plans"].as_array().unwrap().len() as u64,
        v["passing"].as_u64().unwrap()
    );
}

#[test]
fn a_brief_where_nothing_passes_exits_1_and_says_so() {
    trainplan()
        .args(["search", "--loss-target", "1.5"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("no plan passes every check"));
}

#[test]
fn an_exact_search_whose_windows_lie_past_the_grid_passes_and_says_where() {
    // 8B on 2^20 GPUs for a year reaches loss 2.0 from 688.8 T tokens on: past the grid's
    // 50 T, so the grid has no passing count while the windows have plans.
    let args = [
        "search",
        "--exact",
        "--top",
        "3",
        "--gpus",
        "1048576",
        "--max-days",
        "365",
        "--models",
        "8b",
        "--loss-target",
        "2.0",
    ];
    trainplan()
        .args(args)
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "pareto front (loss, days) on the grid: empty, no count of the grid passes",
        ))
        .stdout(predicate::str::contains("no plan passes").not());
    // Without --exact nothing on the grid passes, while the shape's window (past the grid's
    // end) does: the search goes exact by itself, says why, and lists the plans (exit 0).
    trainplan()
        .arg("search")
        .args(&args[4..])
        .assert()
        .code(0)
        .stderr(predicate::str::contains(
            "note: no count of the token grid (10 B to 50 T by 10 B) falls in llama3-8b's passing window",
        ))
        .stdout(predicate::str::contains("over every whole token count in the windows"))
        .stdout(predicate::str::contains("no plan passes").not());
}

#[test]
fn help_shows_examples_and_exits_0() {
    trainplan()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "trainplan check --model 70b --tokens 15e12",
        ));
}

#[test]
fn the_gpu_flag_s_help_names_every_preset() {
    let out = trainplan().args(["check", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    // The bracketed list after "override each", read whole across the help's line breaks
    // (a name found anywhere would not do: "b200" is in "gb200").
    let words: Vec<&str> = help.split_whitespace().collect();
    let text = words.join(" ");
    let list = text
        .split_once("override each [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("--gpu's help lists the presets in brackets");
    let listed: Vec<&str> = list.split(", ").collect();
    let presets: Vec<&str> = trainplan::brief::gpu::PRESETS
        .iter()
        .map(|g| g.name)
        .collect();
    assert_eq!(listed, presets);
}

#[test]
fn a_reader_that_goes_away_is_not_an_error() {
    use std::io::Read;
    use std::process::{Command as Process, Stdio};
    let mut child = Process::new(assert_cmd::cargo::cargo_bin("trainplan"))
        .args(["search", "--all", "--tokens-step", "1e9"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // stdout is dropped here: the pipe is closed with most of the output unread.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn check_with_the_detailed_model_reports_the_step_the_stage_and_every_component() {
    let v = json(&[
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
        "--micro-batch",
        "2",
        "--schedule",
        "interleaved:2",
        "--json",
    ]);
    assert_eq!(v["step"]["micro_batch"], 2);
    assert_eq!(v["step"]["schedule"], "interleaved:2");
    assert_eq!(v["step"]["sequence_parallel"], true);
    assert_eq!(v["worst_stage"]["of"], 4);
    // 16 Mi tokens / (2 × 8192 × DP 64) = 16 micro-batches.
    assert_eq!(v["worst_stage"]["micro_batches"], 16);
    assert_eq!(v["memory_model"]["gradients"], "fp32");
    let m = &v["memory_gb"];
    let parts: f64 = [
        "weights",
        "gradients",
        "optimizer",
        "activations",
        "logits",
        "transient",
        "reserve",
    ]
    .iter()
    .map(|k| m[k].as_f64().unwrap())
    .sum();
    assert!((parts - m["total"].as_f64().unwrap()).abs() < 1e-9);
}

#[test]
fn the_plate_model_stays_the_default_and_its_json_has_no_detailed_keys() {
    let v = json(&[
        "check", "--model", "70b", "--tokens", "4e12", "--tp", "8", "--zero", "1", "--json",
    ]);
    for key in ["step", "worst_stage", "memory_model"] {
        assert!(v.get(key).is_none(), "{key}");
    }
    assert!(v["memory_gb"].get("reserve").is_none());
}

#[test]
fn a_detailed_search_covers_the_step_s_knobs() {
    let v = json(&[
        "search", "--memory", "detailed", "--json", "--top", "3", "--models", "70b",
    ]);
    assert!(v["plans"][0]["step"].is_object());
    assert!(v["shapes"][0]["min_memory_step"].is_object());
    // Every layout with the 3 × 3 × 2 × 2 default steps that go with it.
    assert!(v["evaluated"].as_u64().unwrap() > 112 * 5000);
}

#[test]
fn detailed_flags_without_the_detailed_model_and_steps_that_do_not_fit_the_layout_are_refused() {
    fn with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        let base = ["check", "--model", "70b", "--tokens", "1e12"];
        base.iter().chain(extra).copied().collect()
    }
    refuses(&with(&["--micro-batch", "2"]), "--memory = plate");
    refuses(
        &with(&[
            "--memory",
            "detailed",
            "--micro-batch",
            "3",
            "--global-batch-tokens",
            "16777216",
        ]),
        "--global-batch-tokens = 16777216",
    );
    // Without a fixed batch, three sequences a micro-batch over DP 2,048 come to 48 Mi
    // tokens a round, three times the 16 Mi target.
    refuses(
        &with(&["--memory", "detailed", "--micro-batch", "3"]),
        "invalid global batch = 50,331,648 tokens",
    );
    refuses(
        &with(&["--memory", "detailed", "--schedule", "interleaved:2"]),
        "--schedule = interleaved:2",
    );
    refuses(
        &with(&["--memory", "detailed", "--sequence-parallel", "on"]),
        "--sequence-parallel = on",
    );
    refuses(
        &with(&[
            "--memory", "detailed", "--tp", "8", "--pp", "16", "--stages", "llama3",
        ]),
        "--stages = llama3",
    );
    refuses(
        &with(&["--memory", "detailed", "--reserve-gb", "-1"]),
        "--reserve-gb = -1",
    );
    refuses(
        &["search", "--memory", "detailed", "--schedules", "gpipe"],
        "--schedule = gpipe",
    );
    refuses(
        &["search", "--memory", "detailed", "--micro-batches", "0"],
        "--micro-batches = 0",
    );
}

#[test]
fn check_with_the_detailed_time_model_derives_mfu_and_where_each_second_goes() {
    let v = json(&[
        "check", "--model", "70b", "--tokens", "4e12", "--tp", "8", "--pp", "4", "--zero", "1",
        "--memory", "detailed", "--time", "detailed", "--json",
    ]);
    let b = &v["breakdown"];
    let parts: f64 = [
        "compute",
        "tp_comm",
        "pp_comm",
        "dp_comm",
        "bubble",
        "optimizer",
    ]
    .iter()
    .map(|k| b[k].as_f64().unwrap())
    .sum();
    let step = v["step_seconds"].as_f64().unwrap();
    assert!((parts - step).abs() < 1e-9 * step);
    let mfu = v["mfu"].as_f64().unwrap();
    assert!(mfu > 0.1 && mfu < 0.7, "{mfu}");
    // Days are the wall-clock days: compute days over goodput.
    let goodput = v["failures"]["goodput"].as_f64().unwrap();
    let compute = v["compute_days"].as_f64().unwrap();
    assert!((v["days"].as_f64().unwrap() - compute / goodput).abs() < 1e-9);
    assert!(v["days_plate"].as_f64().unwrap() > 0.0);
    assert!(v["failures"]["expected_failures"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_search_ranks_by_derived_days_and_shows_the_assumed_days_beside_them() {
    let v = json(&[
        "search", "--memory", "detailed", "--time", "detailed", "--rank", "days", "--top", "3",
        "--models", "70b", "--json",
    ]);
    let plans = v["plans"].as_array().unwrap();
    let days: Vec<f64> = plans.iter().map(|p| p["days"].as_f64().unwrap()).collect();
    assert!(days.windows(2).all(|w| w[0] <= w[1]));
    assert!(plans
        .iter()
        .all(|p| p["days_plate"].is_f64() && p["mfu"].is_f64()));
}

#[test]
fn time_flags_need_the_models_they_belong_to() {
    refuses(
        &[
            "check", "--model", "70b", "--tokens", "1e12", "--time", "detailed",
        ],
        "--time = detailed",
    );
    refuses(
        &[
            "check",
            "--model",
            "70b",
            "--tokens",
            "1e12",
            "--tp-overlap",
            "0.5",
        ],
        "--time = plate",
    );
    refuses(
        &[
            "check",
            "--model",
            "70b",
            "--tokens",
            "1e12",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--dp-overlap",
            "2",
        ],
        "--dp-overlap = 2",
    );
    refuses(
        &[
            "search",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--efficiency",
            "/nonexistent.json",
        ],
        "cannot read '/nonexistent.json'",
    );
    refuses(
        &["search", "--inter-node-gbps", "0"],
        "brief.topology.inter_node_gbps = 0",
    );
    refuses(
        &["search", "--failures-per-gpu-hour", "-1"],
        "brief.reliability.failures_per_gpu_hour = -1",
    );
}

#[test]
fn a_measured_efficiency_table_changes_the_derived_mfu() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eff.json");
    std::fs::write(&path, r#"{"points": [{"width": 1024, "efficiency": 0.8}]}"#).unwrap();
    let base = [
        "check", "--model", "70b", "--tokens", "4e12", "--tp", "8", "--memory", "detailed",
        "--time", "detailed", "--stack", "eager", "--json",
    ];
    let default = json(&base)["mfu"].as_f64().unwrap();
    let mut with = base.to_vec();
    with.extend(["--efficiency", path.to_str().unwrap()]);
    let measured = json(&with)["mfu"].as_f64().unwrap();
    assert!(measured > default * 1.5, "{measured} vs {default}");
    // --calibration reads the same table, the file --efficiency read.
    let mut calibrated = base.to_vec();
    calibrated.extend(["--calibration", path.to_str().unwrap()]);
    assert_eq!(json(&calibrated)["mfu"].as_f64().unwrap(), measured);
    std::fs::write(&path, r#"{"points": [{"width": 1024, "efficiency": 1.5}]}"#).unwrap();
    refuses(&with, "efficiency.efficiency = 1.5");
}

#[test]
fn calibrate_round_trips_through_calibration() {
    let dir = tempfile::tempdir().unwrap();
    let fit = dir.path().join("fit.json");
    let out = trainplan()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "calibrate",
            "data/published/runs.json",
            "-o",
            fit.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(
        report.contains("MAE") && report.contains("nemo-gpt3-175b-bf16-128"),
        "{report}"
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&fit).unwrap()).unwrap();
    let sustained = written["sustained"].as_f64().unwrap();
    // The shipped default is this fit, so a check reads the same with and without the file.
    assert!((sustained - trainplan::cost::chip::calibration::PUBLISHED_SUSTAINED).abs() < 1e-3);
    let base = [
        "check", "--model", "70b", "--tokens", "4e12", "--tp", "8", "--pp", "4", "--memory",
        "detailed", "--time", "detailed", "--json",
    ];
    let mut with = base.to_vec();
    with.extend(["--calibration", fit.to_str().unwrap()]);
    let (a, b) = (
        json(&base)["mfu"].as_f64().unwrap(),
        json(&with)["mfu"].as_f64().unwrap(),
    );
    assert!((a - b).abs() < 2e-3 * a, "{a} vs {b}");
    // A different fit changes the answer; a value out of bounds is refused by name.
    std::fs::write(&fit, r#"{"sustained": 0.6}"#).unwrap();
    assert!(json(&with)["mfu"].as_f64().unwrap() < 0.8 * a);
    std::fs::write(&fit, r#"{"sustained": 1.2}"#).unwrap();
    refuses(&with, "calibration.sustained = 1.2");
    std::fs::write(&fit, r#"{"sustained": 0.8, "extra": 1}"#).unwrap();
    refuses(&with, "extra");
}

#[test]
fn every_stack_grades_a_run_and_names_itself_and_an_unknown_gpu_is_refused() {
    let base = [
        "check", "--model", "70b", "--tokens", "4e12", "--tp", "8", "--pp", "4", "--memory",
        "detailed", "--time", "detailed", "--json", "--stack",
    ];
    let mut seen = Vec::new();
    for stack in [
        "megatron-te",
        "llama3",
        "torchtitan",
        "torchtitan-compile",
        "maxtext",
        "megatron-deepspeed",
        "eager",
    ] {
        let mut args = base.to_vec();
        args.push(stack);
        let plan = json(&args);
        assert_eq!(plan["memory_model"]["stack"], stack);
        seen.push(plan["mfu"].as_f64().unwrap());
    }
    // Fused, overlapped Megatron-core is faster than the eager curve.
    assert!(seen[0] > seen[6], "{seen:?}");
    // Every preset has kernel figures; a brief near none of them has none.
    let mut mi300 = base.to_vec();
    mi300.extend(["megatron-te", "--gpu", "mi300x"]);
    assert_eq!(json(&mi300)["memory_model"]["stack"], "megatron-te");
    let mut odd = base.to_vec();
    odd.extend(["megatron-te", "--gpu", "mi300x", "--peak-tflops", "400"]);
    refuses(
        &odd,
        "invalid --stack = megatron-te: a GPU with published kernel figures",
    );
    // DeepSpeed's pipeline does not interleave.
    let mut ds = base.to_vec();
    ds.extend(["megatron-deepspeed", "--schedule", "interleaved:2"]);
    refuses(
        &ds,
        "the megatron-deepspeed stack has no interleaved schedule",
    );
}

#[test]
fn failures_that_outpace_restarts_free_checkpoints_and_no_failures_are_handled() {
    let base = [
        "check", "--model", "70b", "--tokens", "4e12", "--tp", "8", "--zero", "1", "--memory",
        "detailed", "--time", "detailed",
    ];
    let with = |extra: &[&'static str]| base.iter().chain(extra).copied().collect::<Vec<&str>>();
    refuses(
        &with(&["--failures-per-gpu-hour", "1"]),
        "invalid brief.reliability = a failure every",
    );
    let none = json(&with(&["--failures-per-gpu-hour", "0", "--json"]));
    assert_eq!(none["failures"]["goodput"], 1.0);
    assert_eq!(none["failures"]["mtbf_hours"], Value::Null);
    assert!(none["days"].is_f64());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("free.json");
    std::fs::write(
        &path,
        r#"{"reliability": {"checkpoint_bytes_per_param": 0}}"#,
    )
    .unwrap();
    let mut free = with(&["--json", "--brief"]);
    free.push(path.to_str().unwrap());
    let v = json(&free);
    assert!(v["days"].as_f64().unwrap().is_finite());
    assert!(v["failures"]["goodput"].as_f64().unwrap() < 1.0);
}

#[test]
fn a_search_with_detailed_time_needs_detailed_memory() {
    refuses(&["search", "--time", "detailed"], "--time = detailed");
}

#[test]
fn a_shape_family_finds_shapes_near_the_compute_optimal_size() {
    let args = [
        "search",
        "--layers",
        "40..160:8",
        "--hidden",
        "6144..20480:1024",
        "--ffn-ratio",
        "3.0..4.0:0.5",
    ];
    let out = trainplan().args(args).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("best shapes by loss"), "{text}");
    assert!(
        text.contains("the best preset, llama3-70b, comes"),
        "{text}"
    );
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let v = json(&with_json);
    let best = &v["plans"][0];
    let optimum = v["compute_optimal"]["params"].as_f64().unwrap();
    let params = best["params"].as_f64().unwrap();
    // Under the plate model the best shape for loss within the month is about compute-optimal.
    assert!(
        (params / optimum - 1.0).abs() < 0.1,
        "{params} vs {optimum}"
    );
    assert!(
        best["loss"].as_f64().unwrap() < 1.9479,
        "beats llama3-70b's best"
    );
    let shapes = v["shapes"].as_array().unwrap();
    assert!(shapes.len() > 3 && shapes.iter().any(|s| s["best_plan"].is_object()));
}

#[test]
fn a_partial_or_malformed_family_is_refused() {
    refuses(
        &["search", "--layers", "40..80:4"],
        "--layers, --hidden and --ffn-ratio together",
    );
    refuses(
        &[
            "search",
            "--layers",
            "80..40",
            "--hidden",
            "8192",
            "--ffn-ratio",
            "3.5",
        ],
        "--layers = 80..40",
    );
    refuses(
        &[
            "search",
            "--layers",
            "1..2000",
            "--hidden",
            "128..1000000:128",
            "--ffn-ratio",
            "1..4:0.01",
        ],
        "shape family",
    );
    refuses(
        &[
            "search",
            "--layers",
            "80",
            "--hidden",
            "100",
            "--ffn-ratio",
            "3.5",
        ],
        "--hidden = 100",
    );
}

#[test]
fn exact_ranking_finds_the_window_edges_the_grid_rounds_off() {
    let by_loss = json(&["search", "--exact", "--json", "--top", "1"]);
    assert_eq!(by_loss["exact"], true);
    // 70B at the most tokens the month allows, D_hi = 4,960,782,062,099, not the grid's 4.96e12.
    assert_eq!(by_loss["plans"][0]["tokens"], 4_960_782_062_099u64);
    let by_days = json(&[
        "search", "--exact", "--json", "--top", "1", "--rank", "days",
    ]);
    assert_eq!(by_days["plans"][0]["tokens"], 3_380_993_485_052u64);
    refuses(&["search", "--exact", "--all"], "--exact");
}

#[test]
fn a_brief_file_can_carry_the_shape_family() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("brief.json");
    std::fs::write(
        &path,
        r#"{"family": {"layers": "40..120:40", "hidden": "8192..12288:4096", "ffn_ratio": "3.5"}}"#,
    )
    .unwrap();
    let v = json(&["search", "--json", "--brief", path.to_str().unwrap()]);
    // 3 presets + 3 × 2 family shapes, less L80-h8192, which is llama3-70b.
    assert_eq!(v["shapes"].as_array().unwrap().len(), 8);
    assert_eq!(v["brief"]["family"]["layers"], "40..120:40");
    std::fs::write(
        &path,
        r#"{"family": {"layers": "40..", "hidden": "8192", "ffn_ratio": "3.5"}}"#,
    )
    .unwrap();
    refuses(
        &["search", "--brief", path.to_str().unwrap()],
        "brief.family.layers = 40..",
    );
}

#[test]
fn a_run_interrupted_by_ctrl_c_leaves_the_earlier_files_intact() {
    let dir = tempfile::tempdir().unwrap();
    let front = dir.path().join("front.json");
    let plot = dir.path().join("plot.svg");
    std::fs::write(&front, "the earlier front").unwrap();
    std::fs::write(&plot, "the earlier plot").unwrap();
    // A sweep of 64,617 shapes (seconds), interrupted a fraction of a second in.
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_trainplan"));
    // SIGINT's default action in the child, even where this test inherits it ignored (`nohup`
    // sets it to SIG_IGN, and an ignored signal stays ignored across exec): else the interrupt
    // below is lost and the sweep runs to the end.
    #[cfg(unix)]
    unsafe {
        use std::os::unix::process::CommandExt;
        // SAFETY: signal(2) is async-signal-safe, as pre_exec requires between fork and exec.
        command.pre_exec(|| {
            if libc::signal(libc::SIGINT, libc::SIG_DFL) == libc::SIG_ERR {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command
        .args([
            "search",
            "--layers",
            "20..200:1",
            "--hidden",
            "4096..24576:512",
            "--ffn-ratio",
            "2.5..4.5:0.125",
            "--pareto",
        ])
        .arg(&front)
        .arg("--plot")
        .arg(&plot)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = child.wait_with_output().unwrap().status;
    assert!(!status.success(), "the sweep finished before the interrupt");
    assert_eq!(
        std::fs::read_to_string(&front).unwrap(),
        "the earlier front"
    );
    assert_eq!(std::fs::read_to_string(&plot).unwrap(), "the earlier plot");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn check_sensitivity_under_the_plate_moves_the_mfu_and_days_as_its_inverse() {
    // 70B on 4.96 T tokens at TP 8, ZeRO 3: 29.995 days at the assumed 40 % MFU. At 30 % the
    // same 6ND FLOPs take 1/0.75 as long (39.99 days, over the month); at 50 %, 1/1.25.
    let design = [
        "check", "--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--zero", "3",
    ];
    let v = json(&[&design[..], &["--sensitivity", "--json"]].concat());
    let s = &v["sensitivity"];
    let base = v["days"].as_f64().unwrap();
    assert_eq!(s["base"]["days"].as_f64(), Some(base));
    let rows = s["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "the plate has one uncertain input");
    let mfu = &rows[0];
    assert_eq!(mfu["input"], "--mfu");
    let low = mfu["at_low"]["days"].as_f64().unwrap();
    let high = mfu["at_high"]["days"].as_f64().unwrap();
    assert!((low * 0.75 / base - 1.0).abs() < 1e-12, "{low} {base}");
    assert!((high * 1.25 / base - 1.0).abs() < 1e-12, "{high} {base}");
    assert_eq!(mfu["at_low"]["failing"], serde_json::json!(["days"]));
    assert_eq!(mfu["at_high"]["pass"], true);
    // The text: the table and the one end that flips the verdict; the plan still passes.
    trainplan()
        .args(design)
        .arg("--sensitivity")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "  --mfu   0.3 – 0.5   0.4  39.99 – 24.00  30.0 % – 50.0 %  FAIL (days) / PASS",
        ))
        .stdout(predicate::str::contains(
            "the plan fails with --mfu 0.3: 40.0 days, over the 30-day limit",
        ));
    // Without the flag the output has no sensitivity.
    assert!(json(&[&design[..], &["--json"]].concat())
        .get("sensitivity")
        .is_none());
}

#[test]
fn the_issue_s_4096_gpu_plan_fails_without_dp_overlap_and_another_plan_then_ranks_first() {
    // The detailed search's answer on 4,096 GPUs: 405B at TP 2 × PP 1 × DP 2,048, ZeRO 3,
    // 45.8 % MFU. With no DP overlap its exposed ZeRO 3 traffic takes it past the month.
    let args = [
        "search",
        "--gpus",
        "4096",
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--top",
        "1",
        "--sensitivity",
        "--json",
        // Issue 16's space: without context parallelism (which finds a faster plan here).
        "--cp",
        "1",
    ];
    let v = json(&args);
    let first = &v["plans"][0];
    assert_eq!(first["model"], "llama3-405b");
    assert_eq!(
        first["layout"],
        serde_json::json!({"tp": 2, "cp": 1, "pp": 1, "dp": 2048, "zero": 3, "replicate": 1})
    );
    let s = &v["sensitivity"];
    let rows = s["plan"]["rows"].as_array().unwrap();
    assert_eq!(rows[0]["input"], "--dp-overlap", "the largest swing");
    let dp = &rows[0]["at_low"];
    assert!(
        dp["days"].as_f64().unwrap() > 41.0 && dp["pass"] == false,
        "{dp}"
    );
    assert!(dp["days"].as_f64().unwrap() >= first["days"].as_f64().unwrap());
    // Its step does not overlap TP communication (at TP 2 the chunked GEMMs cost more than
    // the overlap hides), and PP 1 sends nothing between stages.
    let unmoved: Vec<&str> = s["plan"]["unmoved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["input"].as_str().unwrap())
        .collect();
    assert_eq!(unmoved, ["--tp-overlap", "--pp-overlap"]);
    assert_eq!(first["step"]["tp_comm_overlap"], false);
    // The search again at each end of the six inputs' ranges, less the ends at the base.
    assert_eq!(s["searches"], 9);
    let change = s["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["input"] == "--dp-overlap" && c["end"] == "low")
        .expect("another plan ranks first without DP overlap");
    assert_eq!(change["same_layout"], false);
    assert!(change["first"]["days"].as_f64().unwrap() <= 30.0);
    assert_ne!(change["first"]["layout"], first["layout"]);
    // The same at any thread count.
    let one = trainplan()
        .args(args)
        .args(["--threads", "1"])
        .output()
        .unwrap();
    let three = trainplan()
        .args(args)
        .args(["--threads", "3"])
        .output()
        .unwrap();
    assert_eq!(one.stdout, three.stdout);
}

#[test]
fn search_sensitivity_where_no_plan_passes_says_where_one_would() {
    // 20 days: nothing passes at 40 % MFU; at 50 % 70B does.
    trainplan()
        .args(["search", "--max-days", "20", "--sensitivity"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "sensitivity: no plan passes, so none is graded again",
        ))
        .stdout(predicate::str::contains("  with --mfu 0.5: llama3-70b on"));
}

#[test]
fn sensitivity_is_refused_where_it_has_no_place() {
    let design = [
        "check",
        "--model",
        "70b",
        "--tokens",
        "4.96e12",
        "--sensitivity",
    ];
    refuses(
        &[&design[..], &["--format", "csv"]].concat(),
        "invalid --sensitivity = with --format csv: the text report or --json",
    );
    refuses(
        &[&design[..], &["--format", "megatron"]].concat(),
        "--sensitivity = with --format megatron",
    );
    refuses(
        &["search", "--sensitivity", "--format", "markdown"],
        "--sensitivity = with --format markdown",
    );
    refuses(&["search", "--sensitivity", "--all"], "--sensitivity");
    refuses(
        &["search", "--sensitivity", "--shard", "1/2"],
        "--sensitivity",
    );
    refuses(&["merge", "--sensitivity", "x.json"], "--sensitivity");
    // A tornado chart needs a first plan.
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("t.svg");
    refuses(
        &[
            "search",
            "--max-days",
            "20",
            "--sensitivity",
            "--plot",
            svg.to_str().unwrap(),
        ],
        "a search where some plan passes",
    );
    assert!(!svg.exists());
}

#[test]
fn fp8_on_a_gpu_without_fp8_tensor_cores_is_refused_whatever_the_time_model() {
    // The A100 has no FP8 tensor cores: the detailed memory model alone (plate time) must not
    // grade an FP8 step as if it had.
    refuses(
        &[
            "check",
            "--gpu",
            "a100",
            "--model",
            "70b",
            "--tokens",
            "1e12",
            "--memory",
            "detailed",
            "--precision",
            "fp8",
        ],
        "invalid --precision = fp8: bf16, or a GPU with FP8 tensor cores",
    );
}

#[test]
fn a_detailed_report_names_the_kernel_figures_not_measured_on_its_gpu() {
    let args = |gpu: &'static str, stack: &'static str| {
        vec![
            "check", "--model", "70b", "--tokens", "4e12", "--tp", "8", "--pp", "4", "--memory",
            "detailed", "--time", "detailed", "--gpu", gpu, "--stack", stack,
        ]
    };
    // GB300: no GEMM is published, so its ceilings are the GB200's, and the JSON says so.
    let mut gb300 = args("gb300", "megatron-te");
    gb300.push("--json");
    let plan = json(&gb300);
    assert_eq!(plan["kernel_figures"]["chip"], "gb300");
    let derived = plan["kernel_figures"]["derived"].as_array().unwrap();
    assert!(derived
        .iter()
        .any(|d| d == "BF16 GEMM ceiling: the gb200's (sibling rule)"));
    let text = trainplan()
        .args(args("gb300", "megatron-te"))
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("figures   the gb300's kernel figures; derived, not measured:"),
        "{text}"
    );
    // The eager curve on a B200: measured on an H200, and the report says so.
    let mut eager = args("b200", "eager");
    eager.push("--json");
    let plan = json(&eager);
    let derived = plan["kernel_figures"]["derived"][0].as_str().unwrap();
    assert!(
        derived.starts_with("the eager curve: measured on an H200"),
        "{derived}"
    );
    // On the H100 every figure is measured: nothing is added.
    let mut h100 = args("h100", "megatron-te");
    h100.push("--json");
    assert!(json(&h100).get("kernel_figures").is_none());
}

#[test]
fn each_new_precision_is_refused_where_it_does_not_run_and_runs_where_it_does() {
    let base = [
        "check", "--model", "70b", "--tokens", "4e12", "--tp", "8", "--pp", "4", "--memory",
        "detailed", "--time", "detailed", "--json", "--gpu",
    ];
    let with = |gpu: &'static str, precision: &'static str| {
        let mut a = base.to_vec();
        a.extend([gpu, "--precision", precision]);
        a
    };
    let bf16 = json(&with("b200", "bf16"))["mfu"].as_f64().unwrap();
    let mxfp8 = json(&with("b200", "mxfp8"))["mfu"].as_f64().unwrap();
    let nvfp4 = json(&with("b200", "nvfp4"))["mfu"].as_f64().unwrap();
    assert!(bf16 < mxfp8 && mxfp8 < nvfp4, "{bf16} {mxfp8} {nvfp4}");
    refuses(
        &with("h100", "mxfp8"),
        "invalid --precision = mxfp8: bf16, or a GPU that scales FP8 by blocks",
    );
    refuses(
        &with("mi355x", "nvfp4"),
        "invalid --precision = nvfp4: bf16, or a GPU with NVFP4 tensor cores",
    );
    refuses(
        &with("b200", "mxfp4"),
        "invalid --precision = mxfp4: a precision the megatron-te stack has a CUDA recipe for on the b200",
    );
    // MXFP4 runs on the MI355X under AMD's Primus, and is faster than its BF16.
    let mi355x = json(&with("mi355x", "bf16"))["mfu"].as_f64().unwrap();
    let mxfp4 = json(&with("mi355x", "mxfp4"))["mfu"].as_f64().unwrap();
    assert!(mi355x < mxfp4, "{mi355x} {mxfp4}");
    let mut titan = with("mi355x", "mxfp8");
    titan.extend(["--stack", "torchtitan"]);
    assert_eq!(json(&titan)["step"]["precision"], "mxfp8");
}

#[test]
fn a_search_over_both_precisions_says_what_fp8_buys_over_bf16() {
    let out = trainplan()
        .args([
            "search", "--models", "70b", "--memory", "detailed", "--time", "detailed",
        ])
        .args(["--precisions", "bf16,fp8"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("llama3-70b by precision, each at its fastest configuration that fits:"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("fp8 over bf16:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("× the pace, at most ") && line.contains(" tokens in 30.0 days against "),
        "{line}"
    );
}

#[test]
fn tp_overlap_is_refused_by_name_where_the_stack_or_the_step_cannot_run_it() {
    // A stack without the overlap, asked to search it: one line, before the search starts.
    refuses(
        &[
            "search",
            "--memory",
            "detailed",
            "--stack",
            "llama3",
            "--tp-comm-overlap",
            "on",
        ],
        "invalid --tp-comm-overlap = on: off: the llama3 stack has no TP-communication overlap",
    );
    // One step without sequence parallelism: check names the rule.
    let check = [
        "check", "--model", "70b", "--tokens", "1e12", "--tp", "8", "--memory", "detailed",
    ];
    refuses(
        &[
            &check[..],
            &["--sequence-parallel", "off", "--tp-comm-overlap", "on"],
        ]
        .concat(),
        "invalid --tp-comm-overlap = on: off without sequence parallelism",
    );
    // By default check overlaps where the stack does, with sequence parallelism.
    let v = json(&[&check[..], &["--json"]].concat());
    assert_eq!(v["step"]["tp_comm_overlap"], true);
    let v = json(&[&check[..], &["--stack", "llama3", "--json"]].concat());
    assert_eq!(v["step"]["tp_comm_overlap"], false);
}

#[test]
fn a_run_that_repeats_its_data_is_graded_by_its_effective_tokens() {
    // 8B on 100B tokens of 25B unique: four epochs, graded as 93.14B effective tokens
    // (Muennighoff et al.'s D', worked in Python) and a higher loss than 100B fresh tokens.
    let design = [
        "check",
        "--model",
        "8b",
        "--tokens",
        "100e9",
        "--tp",
        "1",
        "--pp",
        "1",
        "--zero",
        "1",
        "--loss-law",
        "muennighoff",
        "--json",
    ];
    let repeated = json(&[&design[..], &["--unique-tokens", "25e9"]].concat());
    let fresh = json(&design);
    let data = &repeated["data"];
    assert_eq!(data["epochs"], 4.0);
    let effective = data["effective_tokens"].as_f64().unwrap();
    assert!((effective / 93.141_828e9 - 1.0).abs() < 1e-7, "{effective}");
    let loss = |v: &Value| v["loss"].as_f64().unwrap();
    assert!(loss(&repeated) > loss(&fresh));
    // The plain law has nothing to say of repeats: no data section, and unique tokens refused.
    let plain = json(&["check", "--model", "8b", "--tokens", "100e9", "--json"]);
    assert!(plain.get("data").is_none());
    refuses(
        &["search", "--models", "8b", "--unique-tokens", "25e9"],
        "a law that says what repeated tokens are worth",
    );
    // A search under the law ranks and windows every shape on the repeated data.
    let search = json(&[
        "search",
        "--models",
        "8b,70b",
        "--loss-law",
        "muennighoff",
        "--unique-tokens",
        "2e12",
        "--loss-target",
        "2.06",
        "--json",
        "--top",
        "1",
    ]);
    let plan = &search["plans"][0];
    assert_eq!(plan["data"]["epochs"], 4.96e12 / 2e12, "{plan}");
    // 8B's floor on unlimited data, 2.0365 under this law, is below the target; on 2T unique tokens repeats
    // saturate short of it (2.0620).
    let eight = &search["shapes"][0];
    assert!(eight["token_window"].is_null(), "{eight}");
    assert!((eight["loss_floor"].as_f64().unwrap() - 2.061_996).abs() < 1e-6);
    let unlimited = json(&[
        "search",
        "--models",
        "8b",
        "--loss-law",
        "muennighoff",
        "--loss-target",
        "2.06",
        "--json",
        "--top",
        "1",
    ]);
    assert!(unlimited["shapes"][0]["token_window"].is_array());
}

/// B200 figures on NVL72's hosts of 4 in racks of 72 (the GB200 preset's shape), 512 GPUs:
/// seven full racks and 8 GPUs of an eighth.
const RACKS: [&str; 13] = [
    "check",
    "--model",
    "70b",
    "--tokens",
    "1e12",
    "--gpu",
    "b200",
    "--gpus",
    "512",
    "--gpus-per-node",
    "4",
    "--scale-up-gpus",
    "72",
];

#[test]
fn a_scale_up_domain_larger_than_the_host_states_where_the_ranks_sit() {
    let args: Vec<&str> = RACKS
        .iter()
        .copied()
        .chain(["--tp", "8", "--cp", "2", "--pp", "4"])
        .collect();
    // TP 8 on hosts of 4 is allowed inside a rack; CP 2 over it (runs of 16 ranks) straddles
    // racks (ranks 64 to 79), and so does DP × CP (16 ranks 8 apart).
    // (1e12 tokens fall short of the loss target: exit 1.)
    trainplan()
        .args(&args)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "placement 512 GPUs on 128 hosts of 4 (a failure takes a host) in 8 NVLink domains of 72 (7 full, 8 GPUs in the last)",
        ))
        .stdout(predicate::str::contains(
            "over NVLink: TP 8; over the NICs: CP 2 (1 of a group in a domain), DP 16 (1 of a group in a domain), PP 4 (1 of a group in a domain)",
        ));
    let v = json(&[args.as_slice(), &["--json"]].concat());
    let p = &v["placement"];
    assert_eq!(p["order"], "tp-cp-ep-dp-pp");
    assert_eq!(
        (&p["hosts"], &p["domains"], &p["last_domain_gpus"]),
        (&Value::from(128), &Value::from(8), &Value::from(8))
    );
    assert_eq!(
        p["groups"][1],
        serde_json::json!({"group": "cp", "size": 2, "stride": 8, "link": "nic", "fewest_per_domain": 1})
    );
    // NVIDIA's practice, 64 of each 72: CP's runs of 16 then lie in one rack.
    let used = json(&[args.as_slice(), &["--scale-up-used", "64", "--json"]].concat());
    assert_eq!(used["placement"]["groups"][1]["link"], "nvlink");
    assert_eq!(used["placement"]["scale_up_used"], 64);
    // Nodes that are their own domain say nothing new.
    let plain = json(&[
        "check", "--model", "70b", "--tokens", "1e12", "--tp", "8", "--json",
    ]);
    assert!(plain.get("placement").is_none());
    assert!(plain["brief"].get("scale_up_gpus").is_none());
}

#[test]
fn a_search_on_racks_states_each_plan_s_placement() {
    let v = json(&[
        "search",
        "--gpu",
        "gb200",
        "--gpus",
        "512",
        "--models",
        "70b",
        "--max-days",
        "60",
        "--top",
        "3",
        "--json",
    ]);
    assert_eq!(v["brief"]["scale_up_gpus"], 72);
    let plans = v["plans"].as_array().unwrap();
    assert!(!plans.is_empty());
    // The issue's command: 512 GB200s are 7 racks of 72 and 8 GPUs of an eighth; each plan
    // says which of its groups ride NVLink inside a rack and which the NICs.
    for p in plans {
        let placement = &p["placement"];
        assert_eq!(placement["domains"], 8, "{p}");
        assert_eq!(placement["last_domain_gpus"], 8, "{p}");
        assert_eq!(placement["gpus_per_host"], 4, "{p}");
        let groups = placement["groups"].as_array().unwrap();
        assert!(!groups.is_empty());
        for g in groups {
            let tp_like = g["group"] == "tp" || g["group"] == "cp" || g["group"] == "ep";
            // TP, CP and EP groups of these plans fit a rack: NVLink.
            if tp_like {
                assert_eq!(g["link"], "nvlink", "{g}");
            }
        }
    }
    trainplan()
        .args([
            "search",
            "--gpu",
            "gb200",
            "--gpus",
            "512",
            "--models",
            "70b",
            "--max-days",
            "60",
            "--top",
            "3",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "(4 per node, NVLink domains of 72)",
        ))
        .stdout(predicate::str::contains(
            "placement of the first plan: 512 GPUs on 128 hosts of 4",
        ));
}

#[test]
fn a_scale_up_domain_that_is_not_whole_hosts_is_refused_by_name() {
    let args: Vec<&str> = RACKS.to_vec();
    let mut bad = args.clone();
    bad[12] = "70";
    refuses(
        &bad,
        "invalid brief.scale_up_gpus = 70: a multiple of the 4 GPUs per node (gpus_per_node), from 4 to 65,536",
    );
    refuses(
        &[args.as_slice(), &["--scale-up-used", "80"]].concat(),
        "invalid brief.scale_up_used = 80: a multiple of the 4 GPUs per node (gpus_per_node), from 4 to the 72 GPUs of a scale-up domain (scale_up_gpus)",
    );
    refuses(
        &[args.as_slice(), &["--tp", "16", "--pp", "4"]].concat(),
        "tp = 16 must divide the 72 GPUs of a scale-up domain used (TP stays inside one NVLink domain)",
    );
}

#[test]
fn fp8_params_alone_keeps_the_weights_in_fp8_as_on_does() {
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "check",
            "--model",
            "70b",
            "--tokens",
            "1e12",
            "--gpus",
            "64",
            "--tp",
            "4",
            "--pp",
            "8",
            "--precision",
            "fp8",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--json",
        ];
        a.extend_from_slice(extra);
        json(&a)
    };
    let bare = args(&["--fp8-params"]);
    assert_eq!(bare, args(&["--fp8-params", "on"]));
    let off = args(&["--fp8-params", "off"]);
    assert!(
        bare["memory_gb"]["total"].as_f64().unwrap() < off["memory_gb"]["total"].as_f64().unwrap()
    );
}

#[test]
fn detailed_is_short_for_both_detailed_models() {
    let long = json(&[
        "check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--time",
        "detailed", "--json",
    ]);
    let short = json(&[
        "check",
        "--model",
        "70b",
        "--tokens",
        "1e12",
        "--detailed",
        "--json",
    ]);
    assert_eq!(long, short);
    assert_eq!(short["memory_model"]["stack"], "megatron-te", "{short}");
    refuses(
        &[
            "check",
            "--model",
            "70b",
            "--tokens",
            "1e12",
            "--detailed",
            "--memory",
            "plate",
        ],
        "'--detailed' cannot be used with '--memory <MEMORY>'",
    );
    refuses(
        &[
            "check",
            "--model",
            "70b",
            "--tokens",
            "1e12",
            "--recompute",
            "none",
        ],
        "--memory detailed (or --detailed)",
    );
}

#[test]
fn check_grades_a_search_s_plan_as_the_search_did() {
    // Issue 42's case: 70B on 1,024 GPUs under the detailed models, where the search's step
    // (no recomputation, SP with TP overlap) is not check's default one.
    let dir = tempfile::tempdir().unwrap();
    let (file, search) = search_json_file(
        dir.path(),
        &[
            "search",
            "--gpus",
            "1024",
            "--max-days",
            "21",
            "--models",
            "70b",
            "--loss-target",
            "1.97",
            "--detailed",
            "--top",
            "4",
            "--json",
        ],
    );
    let plans = search["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 4);
    for (i, listed) in plans.iter().enumerate() {
        let index = (i + 1).to_string();
        let graded = json(&[
            "check",
            "--plan",
            file.to_str().unwrap(),
            "--index",
            &index,
            "--json",
        ]);
        for key in [
            "tokens",
            "layout",
            "step",
            "days",
            "step_seconds",
            "mfu",
            "memory_gb",
            "pass",
        ] {
            assert_eq!(graded[key], listed[key], "plan {index}: {key}");
        }
    }
    refuses(
        &["check", "--plan", file.to_str().unwrap(), "--tp", "8"],
        "--tp = given with --plan",
    );
}

#[test]
fn a_passing_window_between_grid_counts_still_lists_its_plans() {
    // Issue 42's case: 70B passes on 1.733 T – 1.736 T tokens, between two counts of the
    // 10 B-token grid; the search goes exact there rather than list nothing.
    let out = trainplan()
        .args([
            "search",
            "--gpus",
            "1024",
            "--max-days",
            "21",
            "--models",
            "70b",
            "--loss-target",
            "1.97",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        text.contains("passes on 1.733 T – 1.736 T tokens"),
        "{text}"
    );
    assert!(
        text.contains("over every whole token count in the windows"),
        "{text}"
    );
    assert!(!text.contains("no plan passes every check"), "{text}");
    assert!(
        err.contains("no count of the token grid (10 B to 50 T by 10 B) falls in llama3-70b's passing window"),
        "{err}"
    );
    let json = json(&[
        "search",
        "--gpus",
        "1024",
        "--max-days",
        "21",
        "--models",
        "70b",
        "--loss-target",
        "1.97",
        "--json",
    ]);
    assert_eq!(json["exact"], true);
    assert!(!json["plans"].as_array().unwrap().is_empty());
    // Every plan asked for: the windows' whole counts are too many to list, so the search
    // keeps its grid and says how to see them (it does not go exact and never ends).
    for distinct in ["plan", "layout"] {
        trainplan()
            .args([
                "search",
                "--gpus",
                "1024",
                "--max-days",
                "21",
                "--models",
                "70b",
                "--loss-target",
                "1.97",
                "--all",
                "--distinct",
                distinct,
            ])
            .timeout(std::time::Duration::from_secs(60))
            .assert()
            .code(1)
            .stderr(predicate::str::contains(
                "--exact with --top N ranks the window's",
            ));
    }
}

#[test]
fn check_refuses_beside_a_plan_what_it_would_otherwise_drop() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = search_json_file(
        dir.path(),
        &[
            "search",
            "--models",
            "70b",
            "--top",
            "2",
            "--detailed",
            "--json",
        ],
    );
    let plan = file.to_str().unwrap();
    for (extra, needle) in [
        (
            &["--max-days", "1"][..],
            "the brief's flags = given with --plan",
        ),
        (
            &["--stack", "torchtitan"][..],
            "the detailed model's flags = given with --plan",
        ),
        (
            &["--dp-overlap", "0"][..],
            "the time model's flags = given with --plan",
        ),
        (&["--detailed"][..], "--detailed = given with --plan"),
    ] {
        let mut args = vec!["check", "--plan", plan];
        args.extend(extra);
        refuses(&args, needle);
    }
}

#[test]
fn best_loss_searches_to_the_lowest_loss_the_budget_reaches() {
    // The default brief's lowest loss in reach is 70B's at the most tokens 30 days allow,
    // 1.947913: searched to it, rounded up, 70B passes; a hair below it nothing does.
    let v = json(&["search", "--json", "--best-loss"]);
    assert_eq!(v["brief"]["loss_target"], 1.94792);
    let first = &v["plans"][0];
    assert_eq!(first["model"], "llama3-70b");
    let loss = first["loss"].as_f64().unwrap();
    assert!((1.94791..=1.94792).contains(&loss), "{loss}");
    let check = first["check"].as_array().unwrap();
    assert!(check
        .windows(2)
        .any(|w| w[0] == "--loss-target" && w[1] == "1.94792"));
    let below = trainplan()
        .args(["search", "--loss-target", "1.94791", "--exact"])
        .output()
        .unwrap();
    assert_eq!(below.status.code(), Some(1));
    common::refuses(
        &["search", "--best-loss", "--loss-target", "2"],
        "--best-loss",
    );
}

/// A search's JSON (`args` are `search`'s, `--json` among them), written to `plans.json` in
/// `dir` for `check --plan`, and read.
fn search_json_file(dir: &std::path::Path, args: &[&str]) -> (std::path::PathBuf, Value) {
    let out = trainplan().args(args).output().unwrap();
    let file = dir.join("plans.json");
    std::fs::write(&file, &out.stdout).unwrap();
    (file, serde_json::from_slice(&out.stdout).unwrap())
}
