//! `--offload-optimizer F` (Megatron-core's `--optimizer-cpu-offload
//! --optimizer-offload-fraction F`) from the command line: what it refuses, what a plan says of
//! it, and its trip through Megatron-LM's arguments and back.

mod common;

use common::{json, ranked_rows, refuses, trainplan};

/// Llama 3 70B on 64 H100s, TP 4 × PP 4 × DP 4, ZeRO 1 (the distributed optimizer), with
/// `extra` after. The worst stage (the first: 20 layers and the embedding) holds ψ =
/// 4,541,186,048 parameters on a GPU (its BF16 weights, 9.082 GB); ZeRO 1 leaves this GPU
/// n = ψ/4 = 1,135,296,512 of them to step: 12·n = 13.624 GB of FP32 master and moments.
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
        "h100-sxm",
        "--tp",
        "4",
        "--pp",
        "4",
        "--zero",
        "1",
        "--micro-batch",
        "1",
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

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
}

#[test]
fn megatron_core_s_requirements_are_refused_by_name_with_the_value() {
    // The precision-aware optimizer Megatron-LM asserts runs only as the distributed optimizer.
    let mut zero = args(&["--offload-optimizer", "0.5"]);
    set(&mut zero, "--zero", "0");
    refuses(
        &zero,
        "invalid --offload-optimizer = 0.5: 0 at ZeRO 0 (Megatron-core's --optimizer-cpu-offload needs --use-precision-aware-optimizer, which needs the distributed optimizer: ZeRO 1",
    );
    refuses(
        &args(&["--offload-optimizer", "1", "--stack", "torchtitan"]),
        "invalid --offload-optimizer = 1: 0 on the torchtitan stack",
    );
    // The hybrid optimizer keeps FP32 master weights and moments, whatever else is asked.
    refuses(
        &args(&["--offload-optimizer", "1", "--optimizer-states", "bf16"]),
        "invalid --offload-optimizer = 1: 0 with --master-weights fp32 --optimizer-states bf16",
    );
    // A fraction, in hundredths.
    refuses(
        &args(&["--offload-optimizer", "1.5"]),
        "invalid --offload-optimizer = 1.5: a fraction of the optimizer's parameters from 0 to 1",
    );
    refuses(
        &args(&["--offload-optimizer", "0.125"]),
        "invalid --offload-optimizer = 0.125: a fraction of the optimizer's parameters from 0 to 1, in steps of 0.01",
    );
    // The plate model has no optimizer state of its own to move.
    refuses(
        &[
            "check",
            "--model",
            "70b",
            "--tokens",
            "4e12",
            "--offload-optimizer",
        ],
        "invalid --offload-optimizer = 1: none with --memory plate",
    );
    refuses(
        &args(&["--offload-optimizer", "1", "--host-memory-gbps", "0"]),
        "host_memory_gbps",
    );
}

#[test]
fn the_offloaded_fraction_of_the_state_leaves_the_gpu_for_the_host() {
    let plan = |f: &'static str| json(&args(&["--offload-optimizer", f, "--json"]));
    let (none, half, all) = (
        plan("0"),
        plan("0.5"),
        json(&args(&["--offload-optimizer", "--json"])),
    );
    let gb = |p: &serde_json::Value, k: &str| p["memory_gb"][k].as_f64().unwrap();
    let host = |p: &serde_json::Value| p["worst_stage"]["optimizer_host_gb"].as_f64();
    // F = 0: 12·n = 13.624 GB on the GPU, nothing on the host.
    assert!(close(gb(&none, "optimizer"), 12.0 * 1_135_296_512.0 / 1e9));
    assert_eq!(host(&none), None);
    assert_eq!(
        none["memory_model"]["offload_optimizer"],
        serde_json::Value::Null
    );
    // F = 1 (the bare flag): none on the GPU; the host holds 16·n = 18.165 GB (master, m, v
    // and the gradients' pinned FP32 copy).
    assert_eq!(all["memory_model"]["offload_optimizer"], 1.0);
    assert_eq!(gb(&all, "optimizer"), 0.0);
    assert!(close(host(&all).unwrap(), 16.0 * 1_135_296_512.0 / 1e9));
    // F = 0.5: 6.812 GB stays, 9.082 GB on the host.
    assert!(close(gb(&half, "optimizer"), 6.0 * 1_135_296_512.0 / 1e9));
    assert!(close(host(&half).unwrap(), 8.0 * 1_135_296_512.0 / 1e9));
    // Weights, gradients and activations stay where they were.
    for k in ["weights", "gradients", "activations"] {
        assert_eq!(gb(&all, k), gb(&none, k), "{k}");
    }
}

#[test]
fn the_host_s_part_of_the_step_is_the_slowest_of_its_copies_and_its_cpu() {
    let part = |extra: &[&'static str]| {
        let p = json(&args(&[extra, &["--json"]].concat()));
        (
            p["breakdown"]["optimizer"].as_f64().unwrap(),
            p["breakdown"]["optimizer_offload"].as_f64().unwrap_or(0.0),
        )
    };
    // The time model's slowest stage is the last: its final norm adds 8,192 / 4 = 2,048
    // parameters to this GPU's shard, n = 1,135,298,560.
    let n = 1_135_298_560.0;
    let (gpu, none) = part(&[]);
    assert_eq!(none, 0.0);
    // F = 1 on a DGX H100 host (76.8 GB/s a GPU × 0.6): the CPU's Adam moves 28·n bytes in
    // 31.79 GB / 46.08 GB/s = 0.690 s, past the copies (4·n = 4.54 GB out at 64 GB/s, 71 ms;
    // 2·n back, 35 ms); the GPU steps nothing.
    let (g, host) = part(&["--offload-optimizer", "1"]);
    assert_eq!(g, 0.0);
    assert!(close(host, 28.0 * n / 46.08e9), "{host}");
    // F = 0.5: the GPU's half (half its step) and the CPU's half (0.345 s) side by side; the
    // step's optimizer parts add up to the slower.
    let (g, host) = part(&["--offload-optimizer", "0.5"]);
    assert!(close(g, gpu / 2.0));
    assert!(close(g + host, 14.0 * n / 46.08e9));
    // A fast host and a slow link (--host-link-gbps 2): the gradients' 4·n bytes, 2.271 s.
    let (_, host) = part(&[
        "--offload-optimizer",
        "1",
        "--host-link-gbps",
        "2",
        "--host-memory-gbps",
        "10000",
    ]);
    assert!(close(host, 4.0 * n / 2e9), "{host}");
    // The text report's rows.
    let out = trainplan()
        .args(args(&["--offload-optimizer", "0.5"]))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("FP32 master + Adam m, v, 12Ψ/DP; 0.5 on the host, 9.1 GB"),
        "{text}"
    );
    assert!(
        text.contains(
            "optimizer_offload  host's optimizer share: copies and CPU AdamW, past the GPU's"
        ),
        "{text}"
    );
}

#[test]
fn megatron_lm_s_arguments_carry_the_offload_and_read_back_and_other_exporters_refuse_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pretrain.sh");
    let out = trainplan()
        .args(args(&[
            "--offload-optimizer",
            "0.5",
            "--format",
            "megatron",
        ]))
        .output()
        .unwrap();
    let script = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--use-precision-aware-optimizer",
        "--optimizer-cpu-offload",
        "--optimizer-offload-fraction 0.5",
        "--overlap-cpu-optimizer-d2h-h2d",
    ] {
        assert!(script.contains(flag), "{flag}: {script}");
    }
    std::fs::write(&file, &script).unwrap();
    let from = json(&[
        "check",
        "--from",
        file.to_str().unwrap(),
        "--gpu",
        "h100-sxm",
        "--json",
    ]);
    let direct = json(&args(&["--offload-optimizer", "0.5", "--json"]));
    assert_eq!(from["memory_model"]["offload_optimizer"], 0.5);
    assert_eq!(from["worst_stage"], direct["worst_stage"]);
    assert_eq!(from["memory_gb"], direct["memory_gb"]);
    // Without the overlap the plan was not timed that way; without the precision-aware
    // optimizer Megatron-LM itself refuses.
    for (drop, needle) in [
        (
            "--overlap-cpu-optimizer-d2h-h2d",
            "invalid --optimizer-cpu-offload = given: given with --overlap-cpu-optimizer-d2h-h2d",
        ),
        (
            "--use-precision-aware-optimizer",
            "invalid --optimizer-cpu-offload = given: given with --use-precision-aware-optimizer",
        ),
    ] {
        let edited = dir.path().join("edited.sh");
        let lines: Vec<&str> = script.lines().filter(|l| l.trim() != drop).collect();
        std::fs::write(&edited, lines.join("\n")).unwrap();
        refuses(
            &[
                "check",
                "--from",
                edited.to_str().unwrap(),
                "--gpu",
                "h100-sxm",
            ],
            needle,
        );
    }
    // DeepSpeed has no such setting (its ZeRO-Offload is another engine). torchtitan's stack
    // is refused in the plan itself (above), and its exporter takes no ZeRO 1 plan.
    refuses(
        &args(&["--offload-optimizer", "0.5", "--format", "deepspeed"]),
        "invalid --format = deepspeed: a plan without optimizer offload",
    );
}

#[test]
fn deepspeed_s_zero_offload_stays_refused_on_from_by_name() {
    // ZeRO-Offload moves the whole state to DeepSpeedCPUAdam with its own copies and
    // overlap: not the hybrid optimizer --offload-optimizer plans.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ds_config.json");
    std::fs::write(
        &file,
        r#"{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}}"#,
    )
    .unwrap();
    refuses(
        &["check", "--from", file.to_str().unwrap(), "--model", "8b"],
        "DeepSpeed's ZeRO-Offload is not planned (--offload-optimizer is Megatron-core's hybrid optimizer, another engine)",
    );
}

#[test]
fn a_search_that_offloads_the_optimizer_leaves_out_the_zero_stages_megatron_core_refuses() {
    // Megatron-core offloads the distributed optimizer's state alone (ZeRO 1 here): the search
    // weighs the other stages as left out, by name, and ranks ZeRO 1 plans (it once stopped).
    let out = trainplan()
        .args([
            "search",
            "--models",
            "70b",
            "--memory",
            "detailed",
            "--offload-optimizer",
            "0.5",
            "-q",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("configurations left out by --offload-optimizer"),
        "{text}"
    );
    let ranked = ranked_rows(&text);
    assert!(!ranked.is_empty(), "{text}");
    for cols in ranked {
        // #, model, tokens (value and unit), TP, CP, PP, DP, ZeRO.
        assert_eq!(cols[8], "1", "{cols:?}");
    }
}
