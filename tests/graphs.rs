//! CUDA graphs (`--cuda-graphs`) and the host floor of a mixture of experts, from the command
//! line: the time the host's launches of the routed experts add, what removes it, Megatron-LM's
//! file for it read back, and what it is refused with.

mod common;

use common::{json, refuses, trainplan};
use trainplan::cost::chip::calibration::PUBLISHED_HOST_EXPERT;

/// Qwen3-30B-A3B on one 8-GPU B200 node at EP 8 (16 experts a GPU), MXFP8, with `graphs`.
fn plan(graphs: &str) -> Vec<String> {
    [
        "check",
        "--model-config",
        "tests/fixtures/hf/qwen3-30b-a3b/config.json",
        "--gpu",
        "b200",
        "--gpus",
        "8",
        "--ep",
        "8",
        "--zero",
        "1",
        "--micro-batch",
        "4",
        "--seq-len",
        "4096",
        "--precision",
        "mxfp8",
        "--recompute",
        "selective",
        "--tokens",
        "1e12",
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--cuda-graphs",
        graphs,
    ]
    .map(String::from)
    .to_vec()
}

fn checked(args: &[String]) -> serde_json::Value {
    let mut args = args.to_vec();
    args.push("--json".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    json(&args)
}

fn part(v: &serde_json::Value, name: &str) -> f64 {
    v["breakdown"][name].as_f64().unwrap_or(0.0)
}

#[test]
fn the_routed_experts_launches_bind_until_a_whole_iteration_is_captured() {
    let none = checked(&plan("none"));
    let partial = checked(&plan("attn,moe_router,moe_preprocess"));
    let full = checked(&plan("full_iteration"));
    // Each of the 48 MoE layers' micro-batches launches its 16 local experts' work at
    // PUBLISHED_HOST_EXPERT each: 16 × 0.65 = 10.4 ms of host time, which outlasts the
    // routed part's GPU time here, so the difference is exposed on every one of them.
    let host = part(&none, "host");
    assert!(host > 0.0, "{none}");
    let micro_batches = 128.0 * 48.0;
    let per_layer = host / micro_batches;
    assert!(
        per_layer < 16.0 * PUBLISHED_HOST_EXPERT && per_layer > 0.0,
        "{per_layer}"
    );
    // Partial graphs capture what comes before the routed experts, not them: the floor stays.
    assert_eq!(part(&partial, "host"), host);
    // A whole iteration's graphs remove it, and nothing else changes.
    assert_eq!(part(&full, "host"), 0.0);
    for name in ["compute", "ep_comm", "optimizer"] {
        assert_eq!(part(&full, name), part(&none, name), "{name}");
    }
    let (t0, t1) = (
        none["step_seconds"].as_f64().unwrap(),
        full["step_seconds"].as_f64().unwrap(),
    );
    assert!((t0 - t1 - host).abs() < 1e-9 * t0, "{t0} {t1} {host}");
}

#[test]
fn a_dense_model_has_no_host_floor() {
    let base = |graphs: &str| {
        checked(
            &[
                "check",
                "--model",
                "8b",
                "--gpus",
                "8",
                "--tokens",
                "1e12",
                "--memory",
                "detailed",
                "--time",
                "detailed",
                "--cuda-graphs",
                graphs,
            ]
            .map(String::from),
        )
    };
    let (none, full) = (base("none"), base("full_iteration"));
    assert_eq!(part(&none, "host"), 0.0);
    assert_eq!(none["step_seconds"], full["step_seconds"]);
}

#[test]
fn megatron_lm_s_file_names_the_graphs_and_reads_back() {
    for (graphs, implementation, scope) in [
        (
            "attn,moe_router,moe_preprocess",
            "transformer_engine",
            "attn moe_router moe_preprocess",
        ),
        ("full_iteration", "local", "full_iteration"),
    ] {
        let args = plan(graphs);
        let mut export: Vec<String> = vec!["export".into(), "--format".into(), "megatron".into()];
        export.extend(args[1..].iter().cloned());
        let out = trainplan().args(&export).output().unwrap();
        let file = String::from_utf8(out.stdout).unwrap();
        assert!(
            file.contains(&format!("--cuda-graph-impl {implementation}")),
            "{file}"
        );
        assert!(
            file.contains(&format!("--cuda-graph-scope {scope}")),
            "{file}"
        );
        let dir = std::env::temp_dir().join(format!(
            "trainplan-graphs-{}-{implementation}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("graphs.sh");
        std::fs::write(&script, &file).unwrap();
        let read = checked(
            &[
                "check",
                "--from",
                script.to_str().unwrap(),
                "--model-config",
                "tests/fixtures/hf/qwen3-30b-a3b/config.json",
                "--gpu",
                "b200",
                "--memory",
                "detailed",
                "--time",
                "detailed",
            ]
            .map(String::from),
        );
        let planned = checked(&args);
        for key in ["layout", "memory_gb", "step_seconds", "breakdown"] {
            assert_eq!(read[key], planned[key], "{graphs}: {key}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn graphs_are_refused_by_name_where_they_are_not_megatron_core_s() {
    refuses(
        &[
            "check",
            "--model",
            "8b",
            "--gpus",
            "8",
            "--tokens",
            "1e12",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--stack",
            "torchtitan",
            "--cuda-graphs",
            "attn",
        ],
        "--cuda-graphs = attn: none on the torchtitan stack",
    );
    refuses(
        &[
            "check",
            "--model",
            "8b",
            "--tokens",
            "1e12",
            "--memory",
            "detailed",
            "--cuda-graphs",
            "moe",
        ],
        "token-dropping",
    );
    refuses(
        &[
            "check",
            "--model",
            "8b",
            "--tokens",
            "1e12",
            "--memory",
            "detailed",
            "--cuda-graphs",
            "attn,everything",
        ],
        "--cuda-graphs = attn,everything",
    );
}
