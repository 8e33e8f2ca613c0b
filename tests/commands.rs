//! Every plan a search lists carries the `check` command that grades it again (issue 42): run
//! as written, each gives back the plan's memory, days and loss, and the answer's command the
//! detailed grade the report shows.

mod common;

use common::{json, trainplan};
use serde_json::Value;

/// The plan `check` gives for `args` (the words after `trainplan check`), as JSON.
fn checked(args: &[String]) -> Value {
    let out = trainplan()
        .arg("check")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "trainplan check {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The `check` arguments of a listed plan.
fn args_of(plan: &Value) -> Vec<String> {
    plan["check"]
        .as_array()
        .unwrap_or_else(|| panic!("a plan without its command: {plan}"))
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// Runs each listed plan's command of `search args --json` and compares what it grades with
/// what the search listed; returns the commands.
fn each_plan_regraded(args: &[&str]) -> Vec<Vec<String>> {
    let mut search = vec!["search", "--json"];
    search.extend_from_slice(args);
    let v = json(&search);
    let plans = v["plans"].as_array().unwrap();
    assert!(!plans.is_empty(), "no plans for {args:?}");
    let mut commands = Vec::new();
    for plan in plans {
        let args = args_of(plan);
        let again = checked(&args);
        for field in ["tokens", "layout", "step", "days", "loss", "pass", "mfu"] {
            assert_eq!(
                again[field],
                plan[field],
                "{field} of trainplan check {}",
                args.join(" ")
            );
        }
        assert_eq!(again["memory_gb"]["total"], plan["memory_gb"]["total"]);
        commands.push(args);
    }
    commands
}

#[test]
fn the_default_brief_s_plans_are_graded_again_by_their_commands() {
    let commands = each_plan_regraded(&["--top", "4"]);
    assert_eq!(
        commands[0].join(" "),
        "--model llama3-70b --tokens 4.96e12 --tp 1 --pp 1 --zero 3"
    );
}

#[test]
fn a_detailed_search_s_plans_carry_their_whole_step_and_the_brief_s_flags() {
    let commands = each_plan_regraded(&[
        "--detailed",
        "--gpu",
        "b200",
        "--gpus",
        "512",
        "--models",
        "8b",
        "--loss-target",
        "2.2",
        "--max-days",
        "10",
        "--seq-lens",
        "4096,8192",
        "--precisions",
        "bf16,fp8",
        "--top",
        "4",
    ]);
    for c in &commands {
        let line = c.join(" ");
        for flag in [
            "--gpu b200",
            "--gpus 512",
            "--detailed",
            "--micro-batch",
            "--recompute",
            "--schedule",
            "--global-batch-tokens",
            "--precision",
        ] {
            assert!(line.contains(flag), "{flag} missing from {line}");
        }
    }
}

#[test]
fn models_read_from_configs_and_ad_hoc_family_shapes_are_named_so_check_reads_them() {
    let config = "tests/fixtures/hf/mixtral-8x7b-v0.1/config.json";
    let commands = each_plan_regraded(&[
        "--model-config",
        config,
        "--detailed",
        "--gpus",
        "256",
        "--loss-target",
        "2.3",
        "--top",
        "3",
    ]);
    assert!(commands
        .iter()
        .all(|c| c[..2] == ["--model-config", config]));
    // Family shapes, dense and MoE, away from Llama 3's vocabulary and KV heads: each shape
    // once, the presets beside them.
    for experts in [&[][..], &["--experts", "8..8:8", "--top-k", "2..2"][..]] {
        let mut args = vec![
            "--layers",
            "24..32:8",
            "--hidden",
            "4096..4096:1024",
            "--ffn-ratio",
            "3.5..3.5:0.5",
            "--kv-heads",
            "32",
            "--vocab",
            "32000",
            "--loss-target",
            "2.3",
            "--distinct",
            "shape",
        ];
        args.extend_from_slice(experts);
        let commands = each_plan_regraded(&args);
        assert!(
            commands.iter().any(|c| c[1].starts_with("L24-h4096")),
            "{commands:?}"
        );
    }
}

#[test]
fn the_answer_s_command_gives_the_detailed_grade_the_report_shows() {
    // The plate's best plan passing under the detailed model (405B on B200s), and 70B's,
    // which the detailed model runs past the month: the answer is its layout on the most
    // tokens that finish in time.
    for brief in [
        &["--gpu", "b200"][..],
        &["--gpu", "b200", "--models", "70b"],
        &["--mfu", "0.5"],
    ] {
        let out = trainplan().arg("search").args(brief).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let answer: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("answer"))
            .take(3)
            .collect();
        let command = answer[2].trim();
        let args: Vec<String> = command
            .strip_prefix("trainplan check ")
            .unwrap()
            .split(' ')
            .map(String::from)
            .collect();
        let again = checked(&args);
        let days = format!("{:.2} days", again["days"].as_f64().unwrap());
        let gb = format!(
            "{:.2} GB/GPU",
            again["memory_gb"]["total"].as_f64().unwrap()
        );
        assert!(answer[1].contains(&days), "{days} in {}", answer[1]);
        assert!(answer[1].contains(&gb), "{gb} in {}", answer[1]);
        assert_eq!(again["pass"], Value::Bool(true), "{command}");
    }
}

#[test]
fn show_commands_lists_each_plan_s_command_under_the_table() {
    let out = trainplan()
        .args(["search", "--top", "3", "--show-commands", "--gpus", "4096"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let listed: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("commands that grade each plan again"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(listed.len(), 3, "{text}");
    for (i, line) in listed.iter().enumerate() {
        assert!(line.starts_with(&format!("  #{:<3} trainplan check --model ", i + 1)));
        assert!(line.contains("--gpus 4096"), "{line}");
    }
}
