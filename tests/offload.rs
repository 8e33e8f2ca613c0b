//! `--offload-activations N` (Megatron-core's `--cpu-offloading-num-layers N`) from the
//! command line: what it refuses, what a plan says of it, and its trip through Megatron-LM's
//! arguments and back.

mod common;

use common::{json, ranked_rows, refuses, trainplan};

/// Llama 3 70B on 64 GB300s, one stage, ZeRO 3, no recomputation: the published GB300 BF16
/// recipe's layout, with `extra` after.
fn args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut a = vec![
        "check",
        "--model",
        "70b",
        "--tokens",
        "4e12",
        "--gpus",
        "64",
        "--gpu",
        "gb300",
        "--tp",
        "1",
        "--pp",
        "1",
        "--zero",
        "3",
        "--micro-batch",
        "2",
        "--recompute",
        "none",
        "--memory",
        "detailed",
        "--time",
        "detailed",
    ];
    a.extend_from_slice(extra);
    a
}

/// `args` with `flag`'s value replaced.
fn set(args: &mut [&'static str], flag: &str, value: &'static str) {
    let at = args.iter().position(|a| *a == flag).unwrap();
    args[at + 1] = value;
}

#[test]
fn megatron_core_s_limits_are_refused_by_name_with_the_value() {
    // At most L − 1 of the 80 layers.
    refuses(
        &args(&["--offload-activations", "80"]),
        "invalid --offload-activations = 80: fewer than the 80 layers of llama3-70b",
    );
    // No pipeline parallelism, no recomputation, Megatron-core's stack only.
    let mut pp = args(&["--offload-activations", "30"]);
    set(&mut pp, "--pp", "2");
    refuses(
        &pp,
        "invalid --offload-activations = 30: 0 under PP 2 (Megatron-core: \"no support for Pipeline parallelism with CPU offloading\")",
    );
    let mut full = args(&["--offload-activations", "30"]);
    set(&mut full, "--recompute", "full");
    refuses(
        &full,
        "invalid --offload-activations = 30: 0 with --recompute full",
    );
    refuses(
        &args(&["--offload-activations", "30", "--stack", "torchtitan"]),
        "invalid --offload-activations = 30: 0 on the torchtitan stack",
    );
    // The plate model has no activations to move.
    refuses(
        &[
            "check",
            "--model",
            "70b",
            "--tokens",
            "4e12",
            "--offload-activations",
            "3",
        ],
        "invalid --offload-activations = 3: none with --memory plate",
    );
    refuses(
        &args(&["--offload-activations", "30", "--host-link-gbps", "0"]),
        "host_link_gbps",
    );
}

#[test]
fn a_plan_says_what_it_offloads_and_what_the_copies_cost() {
    let plan = json(&[args(&["--offload-activations", "30", "--json"]).as_slice()].concat());
    let stage = &plan["worst_stage"];
    assert_eq!(stage["offloaded_layers"], 30);
    assert!(stage["host_gb"].as_f64().unwrap() > 0.0);
    assert_eq!(plan["memory_model"]["offload_activations"], 30);
    // NVLink-C2C hides the copies; a slow link does not.
    assert_eq!(plan["breakdown"]["offload"], serde_json::Value::Null);
    let slow = json(&args(&[
        "--offload-activations",
        "30",
        "--host-link-gbps",
        "20",
        "--json",
    ]));
    assert!(slow["breakdown"]["offload"].as_f64().unwrap() > 0.0);
    // Without the option, nothing of it.
    let none = json(&args(&["--json"]));
    assert_eq!(
        none["worst_stage"]["offloaded_layers"],
        serde_json::Value::Null
    );
    assert_eq!(
        none["memory_model"]["offload_activations"],
        serde_json::Value::Null
    );
    // The text report's activations row and the step's offload part.
    let out = trainplan()
        .args(args(&[
            "--offload-activations",
            "30",
            "--host-link-gbps",
            "20",
        ]))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("recompute none, 50 layers × 1 micro-batch; 30 on the host, "),
        "{text}"
    );
    assert!(
        text.contains("offload    activations to and from host memory, exposed"),
        "{text}"
    );
}

#[test]
fn megatron_lm_s_arguments_carry_the_offload_and_read_back_and_other_exporters_refuse_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pretrain.sh");
    let out = trainplan()
        .args(args(&[
            "--offload-activations",
            "30",
            "--format",
            "megatron",
        ]))
        .output()
        .unwrap();
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(
        script.contains("--cpu-offloading-num-layers 30"),
        "{script}"
    );
    std::fs::write(&file, &script).unwrap();
    let from = json(&[
        "check",
        "--from",
        file.to_str().unwrap(),
        "--gpu",
        "gb300",
        "--json",
    ]);
    let direct = json(&args(&["--offload-activations", "30", "--json"]));
    assert_eq!(from["memory_model"]["offload_activations"], 30);
    assert_eq!(from["worst_stage"], direct["worst_stage"]);
    assert_eq!(from["memory_gb"], direct["memory_gb"]);
    // Scripts for Megatron-LM before Oct 2025 turn it on with switches beside the count.
    let older = script.replace(
        "--cpu-offloading-num-layers 30",
        "--cpu-offloading --cpu-offloading-activations --cpu-offloading-num-layers 30",
    );
    assert_ne!(older, script);
    std::fs::write(&file, &older).unwrap();
    let from_older = json(&[
        "check",
        "--from",
        file.to_str().unwrap(),
        "--gpu",
        "gb300",
        "--json",
    ]);
    assert_eq!(from_older["memory_gb"], direct["memory_gb"]);
    // torchtitan and DeepSpeed have no such setting.
    refuses(
        &args(&["--offload-activations", "30", "--format", "torchtitan"]),
        "was graded with --offload-activations 30, which no torchtitan setting written here gives",
    );
    refuses(
        &args(&["--offload-activations", "30", "--format", "deepspeed"]),
        "invalid --format = deepspeed: a plan without activation offload",
    );
}

#[test]
fn a_search_that_offloads_leaves_out_the_layouts_megatron_core_cannot_offload() {
    // Megatron-core offloads at PP 1 without recomputation only: the search weighs the rest as
    // left out, by name, and still ranks the one-stage layouts (it once stopped on them).
    let out = trainplan()
        .args([
            "search",
            "--models",
            "70b",
            "--memory",
            "detailed",
            "--offload-activations",
            "30",
            "-q",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("configurations left out by --offload-activations"),
        "{text}"
    );
    // Every ranked plan is one stage.
    let ranked = ranked_rows(&text);
    assert!(!ranked.is_empty(), "{text}");
    for cols in ranked {
        // #, model, tokens (value and unit), TP, CP, PP.
        assert_eq!(cols[6], "1", "{cols:?}");
    }
}
