//! `results/` holds what the tool writes for the default brief. These tests regenerate it and
//! compare byte for byte, so the committed files can never drift from the code. To refresh:
//! `cargo run --release -- search --pareto results/default-front.json > results/default-summary.txt`

mod common;

use common::trainplan;

#[test]
fn results_hold_the_default_brief_s_summary_and_front_as_the_tool_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let front = dir.path().join("front.json");
    let out = trainplan()
        .args(["search", "--pareto"])
        .arg(&front)
        .output()
        .unwrap();
    assert!(out.status.success());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let summary = std::fs::read_to_string(root.join("default-summary.txt")).unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        summary,
        "results/default-summary.txt is stale"
    );
    let committed = std::fs::read_to_string(root.join("default-front.json")).unwrap();
    assert_eq!(
        std::fs::read_to_string(&front).unwrap(),
        committed,
        "results/default-front.json is stale"
    );
}

#[test]
fn the_readme_shows_the_real_output_of_its_examples() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for shown in [
        "results/default-summary.txt",
        "tests/snapshots/check-start.txt",
        "tests/snapshots/check-405b-detailed.txt",
        "tests/snapshots/check-70b-time.txt",
        "tests/snapshots/search-configs-h200.txt",
        "tests/snapshots/brief-h200.toml",
        "tests/snapshots/search-top5.md",
        "tests/snapshots/export-megatron.txt",
        "tests/snapshots/export-deepspeed.json",
        "tests/snapshots/export-torchtitan.toml",
    ] {
        let output = std::fs::read_to_string(root.join(shown)).unwrap();
        assert!(
            readme.contains(&output),
            "README.md does not show the current {shown}"
        );
    }
}

#[test]
fn results_hold_the_default_brief_s_exact_search_as_the_tool_writes_it() {
    let out = trainplan().args(["search", "--exact"]).output().unwrap();
    assert!(out.status.success());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let summary = std::fs::read_to_string(root.join("default-exact-summary.txt")).unwrap();
    let out = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out, summary, "results/default-exact-summary.txt is stale");
    // The exact front is one run of 70B from the fewest tokens that reach the target to the
    // most the month allows, the ends of its window.
    assert!(out.contains("exact pareto front over every whole token count: 1 run,"));
}

#[test]
fn results_hold_the_family_sweep_as_the_tool_writes_it() {
    let out = trainplan()
        .arg("search")
        .args(common::FAMILY_SWEEP)
        .args(["--top", "3"])
        .output()
        .unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let committed = std::fs::read_to_string(root.join("results/family-summary.txt")).unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        committed,
        "results/family-summary.txt is stale"
    );
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(&committed),
        "README.md does not show the current family sweep"
    );
}
