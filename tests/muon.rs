//! Muon (`--optimizer muon`) from the command line: the state it keeps, the Newton–Schulz work
//! it adds, Megatron-LM's file for it read back, and what it is refused with.

mod common;

use common::{json, refuses, trainplan};
use trainplan::cost::step::muon::{layer_flops, newton_schulz_flops};

/// Llama 3 70B on 1,024 GPUs at TP 8 × PP 4 (DP 32), ZeRO 1, with `optimizer`.
fn plan(optimizer: &str) -> Vec<String> {
    [
        "check",
        "--model",
        "70b",
        "--tokens",
        "1e12",
        "--gpus",
        "1024",
        "--tp",
        "8",
        "--pp",
        "4",
        "--zero",
        "1",
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--optimizer",
        optimizer,
    ]
    .map(String::from)
    .to_vec()
}

fn checked(optimizer: &str) -> serde_json::Value {
    let mut args = plan(optimizer);
    args.push("--json".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    json(&args)
}

#[test]
fn muon_keeps_one_moment_of_each_hidden_matrix() {
    // The first stage's 20 layers of 70B's matrices on a TP rank: (2·8,192² + 2·8,192·1,024 +
    // 3·8,192·28,672)/8 = 106,954,752 each, 2,139,095,040 in all; Muon keeps 4 bytes a
    // parameter fewer of them (one FP32 moment, not two), sharded over the 32 DP ranks.
    let (adamw, muon) = (checked("adamw"), checked("muon"));
    let matrices =
        20.0 * (2.0 * 8_192f64.powi(2) + 2.0 * 8_192.0 * 1_024.0 + 3.0 * 8_192.0 * 28_672.0) / 8.0;
    assert_eq!(matrices, 2_139_095_040.0);
    let saved = adamw["memory_gb"]["optimizer"].as_f64().unwrap()
        - muon["memory_gb"]["optimizer"].as_f64().unwrap();
    let expected = 4.0 * matrices / 32.0 / 1e9;
    assert!((saved - expected).abs() < 1e-9, "{saved} {expected}");
    // The step runs the Newton–Schulz iterations and all-reduces the gradients: longer.
    assert!(
        muon["breakdown"]["optimizer"].as_f64().unwrap()
            > 5.0 * adamw["breakdown"]["optimizer"].as_f64().unwrap()
    );
    assert!(
        muon["breakdown"]["dp_comm"].as_f64().unwrap()
            > adamw["breakdown"]["dp_comm"].as_f64().unwrap()
    );
}

#[test]
fn a_layer_s_newton_schulz_runs_on_its_tp_shards() {
    // 70B at TP 8: Q 8,192 × 1,024 and the output 1,024 × 8,192, K and V 8,192 × 128, gate and
    // up 8,192 × 7,168, down 3,584 × 8,192, five iterations each.
    let shape = trainplan::model::preset("70b").unwrap();
    let ns = |r: f64, c: f64| newton_schulz_flops(r, c, 5.0);
    let hand = 2.0 * ns(8_192.0, 1_024.0)
        + 2.0 * ns(8_192.0, 128.0)
        + ns(8_192.0, 7_168.0)
        + ns(3_584.0, 8_192.0);
    let ours = layer_flops(&shape, 8, shape.ffn, 5.0);
    assert!((ours - hand).abs() < 1e-9 * hand, "{ours} {hand}");
    // About 15 TFLOP a layer: 0.3 PFLOP a stage of 20, a fraction of a second on an H100,
    // shared by the 32 data-parallel ranks under dist_muon.
    assert!((ours / 1e12 - 15.0).abs() < 0.5, "{ours}");
}

#[test]
fn megatron_lm_s_file_names_muon_or_its_layer_wise_optimizer_and_reads_back() {
    for (zero, name) in [("0", "muon"), ("1", "dist_muon")] {
        let mut args = plan("muon");
        let at = args.iter().position(|a| a == "--zero").unwrap();
        args[at + 1] = zero.into();
        let mut export: Vec<String> = vec!["export".into(), "--format".into(), "megatron".into()];
        export.extend(args[1..].iter().cloned());
        let out = trainplan().args(&export).output().unwrap();
        let file = String::from_utf8(out.stdout).unwrap();
        assert!(file.contains(&format!("--optimizer {name}")), "{file}");
        assert!(!file.contains("--use-distributed-optimizer"), "{file}");
        let dir =
            std::env::temp_dir().join(format!("trainplan-muon-{}-{zero}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("muon.sh");
        std::fs::write(&script, &file).unwrap();
        let read = json(&[
            "check",
            "--from",
            script.to_str().unwrap(),
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--json",
        ]);
        let mut direct = args.clone();
        direct.push("--json".into());
        let direct: Vec<&str> = direct.iter().map(String::as_str).collect();
        let planned = json(&direct);
        for key in ["layout", "memory_gb", "step_seconds", "memory_model"] {
            assert_eq!(read[key], planned[key], "{name}: {key}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn muon_is_refused_where_it_is_not_costed() {
    let base = |extra: &[&'static str]| {
        let mut a = vec![
            "check",
            "--model",
            "8b",
            "--tokens",
            "1e12",
            "--gpus",
            "64",
            "--memory",
            "detailed",
            "--optimizer",
            "muon",
        ];
        a.extend(extra);
        a
    };
    refuses(
        &base(&["--zero", "2"]),
        "--zero = 2: 0 or 1 with --optimizer muon",
    );
    refuses(
        &base(&["--stack", "torchtitan"]),
        "--stack = torchtitan: megatron-te with --optimizer muon",
    );
    refuses(
        &base(&["--offload-optimizer", "0.5", "--zero", "1"]),
        "0 with --optimizer muon",
    );
    refuses(
        &base(&["--master-weights", "fp16"]),
        "Megatron-core's Muon keeps FP32 masters and moments",
    );
    // DeepSpeed's config steps its own Adam.
    let mut export = vec!["export", "--format", "deepspeed"];
    export.extend(base(&[])[1..].iter().copied());
    refuses(&export, "a plan with AdamW: --optimizer muon");
}
