//! `search --shard I/N` and `merge`: the merged report of every shard equals, byte for byte,
//! the report of one run over all the shapes.

use assert_cmd::Command;

fn trainplan(dir: &std::path::Path) -> Command {
    let mut c = Command::cargo_bin("trainplan").unwrap();
    c.current_dir(dir);
    c
}

/// A run's stdout and its Pareto file.
type Output = (Vec<u8>, Vec<u8>);

/// Runs `search ARGS` as `shards` shards and merges them; returns (merged, single) outputs of
/// `OUTPUT` (report arguments such as `--json`), front files included.
fn sharded_and_single(args: &[&str], shards: u64, output: &[&str]) -> (Output, Output) {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for i in 1..=shards {
        let shard = format!("{i}/{shards}");
        let out = trainplan(dir.path())
            .arg("search")
            .args(args)
            .args(["--shard", &shard])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = format!("part{i}.json");
        std::fs::write(dir.path().join(&file), out.stdout).unwrap();
        files.push(file);
    }
    files.reverse(); // the order of the files does not matter
    let merged = trainplan(dir.path())
        .arg("merge")
        .args(&files)
        .args(output)
        .args(["--pareto", "m.json"])
        .output()
        .unwrap();
    assert!(
        merged.status.code().unwrap() < 2,
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    let single = trainplan(dir.path())
        .arg("search")
        .args(args)
        .args(output)
        .args(["--pareto", "s.json"])
        .output()
        .unwrap();
    let read = |f: &str| std::fs::read(dir.path().join(f)).unwrap();
    (
        (merged.stdout, read("m.json")),
        (single.stdout, read("s.json")),
    )
}

#[test]
fn three_shards_of_the_default_brief_merge_into_the_single_run() {
    let (merged, single) = sharded_and_single(&[], 3, &[]);
    assert_eq!(merged, single);
    let (merged, single) = sharded_and_single(&["--all"], 2, &["--json"]);
    assert_eq!(merged, single);
}

#[test]
fn shards_of_a_family_ranked_by_days_merge_into_the_single_run() {
    let family = [
        "--layers",
        "40..120:16",
        "--hidden",
        "6144..16384:2048",
        "--ffn-ratio",
        "3..4:0.5",
        "--rank",
        "days",
        "--top",
        "7",
    ];
    let (merged, single) = sharded_and_single(&family, 4, &["--json"]);
    assert_eq!(merged, single);
}

#[test]
fn shards_under_the_detailed_models_merge_into_the_single_run() {
    let detailed = [
        "--models", "70b,405b", "--memory", "detailed", "--time", "detailed", "--rank", "memory",
        "--top", "5",
    ];
    let (merged, single) = sharded_and_single(&detailed, 2, &[]);
    assert_eq!(merged, single);
    // With the exact front, whose run ends the merge grades again under the shards' time model.
    let exact = [
        "--models", "70b,405b", "--memory", "detailed", "--time", "detailed", "--exact", "--top",
        "3",
    ];
    let (merged, single) = sharded_and_single(&exact, 2, &[]);
    assert_eq!(merged, single);
}

/// Two shards of `search` with `extra`, `file` of them edited (`from` → `to`, once; `file`
/// holding `holds` first), then merged: the merge's stderr, after checking it exits 2.
fn merge_edited(extra: &[&str], file: &str, holds: &str, from: &str, to: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    for i in 1..=2 {
        let out = trainplan(dir.path())
            .arg("search")
            .args(extra)
            .args(["--shard", &format!("{i}/2")])
            .output()
            .unwrap();
        std::fs::write(dir.path().join(format!("p{i}.json")), out.stdout).unwrap();
    }
    let path = dir.path().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(holds));
    let edited = text.replacen(from, to, 1);
    assert_ne!(edited, text);
    std::fs::write(&path, edited).unwrap();
    let out = trainplan(dir.path())
        .args(["merge", "p1.json", "p2.json"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    err
}

#[test]
fn a_partial_file_with_a_broken_exact_front_is_refused() {
    // A shape whose heads do not divide its hidden size.
    let err = merge_edited(
        &["--exact"],
        "p2.json",
        "\"exact_front\"",
        "\"heads\": 64",
        "\"heads\": 63",
    );
    assert!(err.contains("heads") && err.lines().count() == 1, "{err}");
}

#[test]
fn a_partial_file_of_another_version_is_refused_by_name() {
    let err = merge_edited(
        &[],
        "p1.json",
        "\"kind\"",
        "\"schema_version\": 3",
        "\"schema_version\": 1",
    );
    assert!(
        err.contains("p1.json: schema_version = 1") && err.contains("run the shard again"),
        "{err}"
    );
}

#[test]
fn a_missing_shard_or_a_different_search_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (file, args) in [
        ("a.json", vec!["--shard", "1/2"]),
        ("b.json", vec!["--shard", "2/2", "--gpus", "1024"]),
        ("c.json", vec!["--shard", "2/2"]),
    ] {
        let out = trainplan(dir.path())
            .arg("search")
            .args(&args)
            .output()
            .unwrap();
        std::fs::write(dir.path().join(file), out.stdout).unwrap();
    }
    let merge = |files: &[&str]| {
        trainplan(dir.path())
            .arg("merge")
            .args(files)
            .output()
            .unwrap()
    };
    for (files, needle) in [
        (vec!["a.json"], "each of the 2 shards once"),
        (vec!["a.json", "b.json"], "partial files of one search"),
        (
            vec!["a.json", "a.json", "c.json"],
            "each of the 2 shards once",
        ),
        (vec!["missing.json"], "cannot read 'missing.json'"),
    ] {
        let out = merge(&files);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{files:?}: {err}");
        assert!(
            err.contains(needle) && err.lines().count() == 1,
            "{files:?}: {err}"
        );
    }
    assert!(merge(&["a.json", "c.json"]).status.code().unwrap() < 2);
}

#[test]
fn shards_of_an_exact_ranking_merge_into_the_single_run() {
    let family = [
        "--layers",
        "40..120:20",
        "--hidden",
        "8192..16384:4096",
        "--ffn-ratio",
        "3.5",
        "--exact",
        "--top",
        "4",
    ];
    let (merged, single) = sharded_and_single(&family, 3, &["--json"]);
    assert_eq!(merged, single);
    // The exact front is in the Pareto file, and the shards' runs met in the merge: the front
    // passes between shapes that different shards searched.
    let front: serde_json::Value = serde_json::from_slice(&single.1).unwrap();
    let runs = front["exact_front"]["runs"].as_array().unwrap();
    let models: std::collections::BTreeSet<&str> = runs
        .iter()
        .map(|r| r["first"]["model"].as_str().unwrap())
        .collect();
    assert!(models.len() > 1, "{models:?}");
}

#[test]
fn a_partial_file_that_keeps_no_plans_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = trainplan(dir.path())
        .args(["search", "--models", "8b", "--shard", "1/1"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let none = text.replacen("\"top\": 10", "\"top\": 0", 1);
    assert_ne!(none, text);
    std::fs::write(dir.path().join("p.json"), none).unwrap();
    let out = trainplan(dir.path())
        .args(["merge", "p.json"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        "error: invalid top = 0: a whole number ≥ 1, or null for every plan\n"
    );
}

#[test]
fn shards_of_an_exact_search_whose_windows_miss_the_grid_merge_into_the_single_run() {
    // 405B passes from 817.7 B to 862.4 B tokens, between two counts of a grid in steps of
    // 10^12: no count of the grid passes, yet the exact search has plans, which a merge once
    // refused as more plans than passed.
    let exact = ["--models", "405b", "--exact", "--tokens-step", "1e12"];
    let (merged, single) = sharded_and_single(&exact, 2, &["--json"]);
    assert_eq!(merged, single);
}

#[test]
fn shards_whose_plans_differ_only_in_cp_or_experts_merge_into_the_single_run() {
    // Plans of one shape, tokens, TP, PP, ZeRO and step that differ in their CP degree (or
    // their EP, ETP or replicas) are different plans: a merge once took them for one.
    let cp = [
        "--models",
        "70b",
        "--memory",
        "detailed",
        "--cp",
        "1,2,4",
        "--seq-len",
        "32768",
        "--gpus",
        "4096",
        "--distinct",
        "plan",
        "--top",
        "20",
        "--rank",
        "days",
    ];
    let (merged, single) = sharded_and_single(&cp, 1, &[]);
    assert_eq!(merged, single);
    let mixtral = format!(
        "{}/tests/fixtures/hf/mixtral-8x7b-v0.1/config.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let experts = [
        "--model-config",
        &mixtral,
        "--gpus",
        "256",
        "--loss-law",
        "ludziejewski",
        "--loss-target",
        "2.0",
        "--distinct",
        "plan",
        "--top",
        "50",
        "--rank",
        "memory",
    ];
    let (merged, single) = sharded_and_single(&experts, 2, &["--json"]);
    assert_eq!(merged, single);
}
