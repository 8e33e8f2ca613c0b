//! The plots: each SVG parses and renders to a PNG that shows what it says (the cap line, the
//! bars, the front), carries the plan's numbers in its labels, and is the same at any thread
//! count. `results/plots/` holds the plots docs/guide.md shows, as the tool draws them; with
//! `TRAINPLAN_WRITE_RESULTS` set these tests rewrite them. PNG renders for looking at are left
//! in `target/plots/`.

mod common;

use common::trainplan;
use std::path::{Path, PathBuf};

use resvg::tiny_skia::Pixmap;
use resvg::usvg;

/// Runs trainplan with `args` plus `--plot FILE` and returns the SVG and its stdout.
fn plot(args: &[&str]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plot.svg");
    let out = trainplan()
        .args(args)
        .arg("--plot")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        std::fs::read_to_string(&file).unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

/// Renders `svg` to pixels with the system's fonts (DejaVu Sans for sans-serif where it is
/// installed) and saves the PNG as `target/plots/NAME.png`.
fn render(svg: &str, name: &str) -> Pixmap {
    let mut options = usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    options.fontdb_mut().set_sans_serif_family("DejaVu Sans");
    let tree = usvg::Tree::from_str(svg, &options).expect("the SVG parses");
    let size = tree.size().to_int_size();
    assert_eq!((size.width(), size.height()), (960, 540));
    let mut pixmap = Pixmap::new(size.width(), size.height()).unwrap();
    resvg::render(&tree, usvg::Transform::default(), &mut pixmap.as_mut());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/plots");
    std::fs::create_dir_all(&dir).unwrap();
    pixmap.save_png(dir.join(format!("{name}.png"))).unwrap();
    pixmap
}

/// Pixels of exactly this colour.
fn pixels(p: &Pixmap, (r, g, b): (u8, u8, u8)) -> usize {
    p.pixels()
        .iter()
        .filter(|c| (c.red(), c.green(), c.blue(), c.alpha()) == (r, g, b, 255))
        .count()
}

/// Compares `svg` with `results/plots/NAME.svg`, or rewrites it.
fn committed(svg: &str, name: &str) {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("results/plots")
        .join(format!("{name}.svg"));
    if std::env::var_os("TRAINPLAN_WRITE_RESULTS").is_some() {
        std::fs::write(&path, svg).unwrap();
    } else {
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            old == svg,
            "{} is stale: run with TRAINPLAN_WRITE_RESULTS=1",
            path.display()
        );
    }
}

const CAP_RED: (u8, u8, u8) = (200, 30, 30);
const WEIGHTS_BLUE: (u8, u8, u8) = (78, 121, 167);
const OPTIMIZER_GREEN: (u8, u8, u8) = (89, 161, 79);

#[test]
fn the_starting_plan_s_memory_towers_over_the_cap() {
    let (svg, _) = plot(&[
        "check", "--model", "70b", "--tokens", "15e12", "--tp", "1", "--pp", "1", "--zero", "0",
    ]);
    // SPEC.md: 1,139.6 GB: 141.1 weights, 141.1 gradients, 846.6 optimizer, 10.74 activations.
    for label in [
        "1139.6 GB per GPU does not fit the 72 GB cap",
        "weights 141.1 GB",
        "gradients 141.1 GB",
        "optimizer 846.6 GB",
        "activations 10.74 GB",
        "cap 72 GB",
        "card 80 GB",
    ] {
        assert!(svg.contains(label), "{label}");
    }
    let png = render(&svg, "check-start");
    // The optimizer (847 of 1,140 GB) is the widest bar; the cap is drawn.
    assert!(pixels(&png, OPTIMIZER_GREEN) > 4 * pixels(&png, WEIGHTS_BLUE));
    assert!(pixels(&png, CAP_RED) > 100);
    committed(&svg, "check-start");
}

#[test]
fn a_passing_plan_fits_under_the_cap() {
    let (svg, _) = plot(&[
        "check", "--model", "405b", "--tokens", "8.5e11", "--tp", "8", "--pp", "16", "--zero", "1",
        "--memory", "detailed",
    ]);
    assert!(svg.contains("fits the 72 GB cap"), "{svg}");
    // 2 GB + 5 % fragmentation (1.30 GB) and TE's userbuffers for the default TP overlap,
    // 12 × 8,192 × 16,384 × 2 bytes (3.22 GB).
    assert!(svg.contains("reserve 6.52 GB"), "{svg}");
    let png = render(&svg, "check-405b-detailed");
    assert!(pixels(&png, WEIGHTS_BLUE) > 1000);
    committed(&svg, "check-405b-detailed");
}

#[test]
fn the_search_plot_marks_the_target_the_month_and_the_front() {
    let (svg, _) = plot(&["search"]);
    let report: serde_json::Value = serde_json::from_slice(
        &trainplan()
            .args(["search", "--pareto", "-"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let front = report["front"].as_array().unwrap().len();
    for label in [
        format!("Pareto front ({front} plans)"),
        "target 1.955 and 30 days".into(),
        "llama3-8b (8.03 B parameters)".into(),
        "llama3-70b (70.55 B parameters)".into(),
        "llama3-405b (405.9 B parameters)".into(),
    ] {
        assert!(svg.contains(&label), "{label}");
    }
    let png = render(&svg, "search-default");
    assert!(pixels(&png, (0, 0, 0)) > 1000, "the front's dots");
    assert!(pixels(&png, CAP_RED) > 500, "the target and the day limit");
    committed(&svg, "search-default");
}

#[test]
fn a_family_plot_draws_a_spread_of_sizes_and_says_how_many_are_left_out() {
    let (svg, _) = plot(&[&["search"][..], &common::FAMILY_SWEEP].concat());
    assert!(svg.contains("more shapes not drawn"));
    render(&svg, "search-family");
    committed(&svg, "search-family");
}

/// The example: the detailed search's first plan on 4,096 GPUs.
const DETAILED_4096: [&str; 11] = [
    "--cp",
    "1",
    "--gpus",
    "4096",
    "--memory",
    "detailed",
    "--time",
    "detailed",
    "--sensitivity",
    "--top",
    "1",
];

#[test]
fn a_tornado_chart_draws_each_input_s_days_around_the_base_and_the_limit() {
    let (svg, out) = plot(&[&["search"][..], &DETAILED_4096].concat());
    assert!(out.contains("plan 1 again: llama3-405b"), "{out}");
    // The title names the plan; each input's label gives its ends' days; the lines are named.
    for label in [
        "llama3-405b on 1.85 T tokens, TP 2 × PP 1 × DP 2,048, ZeRO 3: days at each end of each range",
        "--dp-overlap: 0 → 41.57 days, 1 → 29.92 days",
        "as given: 29.915 days",
        "limit: 30 days",
    ] {
        assert!(svg.contains(label), "{label}");
    }
    // The largest swing on top: --dp-overlap's label comes first. The plan's step does not
    // overlap TP communication (at TP 2 the chunked GEMMs cost more than the overlap hides),
    // so --tp-overlap cannot move it and has no bar.
    let at = |s: &str| svg.find(s).unwrap();
    assert!(at("--dp-overlap:") < at("sustained:") && at("sustained:") < at("--restart-minutes:"));
    assert!(!svg.contains("--tp-overlap:"));
    let png = render(&svg, "search-4096-tornado");
    assert!(pixels(&png, WEIGHTS_BLUE) > 5000, "the low ends' bars");
    assert!(pixels(&png, (242, 142, 43)) > 1000, "the high ends' bars");
    assert!(pixels(&png, CAP_RED) > 300, "the day limit");
    committed(&svg, "search-4096-tornado");
}

#[test]
fn check_sensitivity_plots_a_tornado_instead_of_the_memory_chart() {
    let (svg, _) = plot(&[
        "check",
        "--model",
        "70b",
        "--tokens",
        "4.96e12",
        "--tp",
        "8",
        "--zero",
        "3",
        "--sensitivity",
    ]);
    assert!(
        svg.contains("--mfu: 0.3 → 39.99 days, 0.5 → 24.00 days"),
        "{svg}"
    );
    assert!(!svg.contains("cap 72 GB"));
    render(&svg, "check-tornado");
}

#[test]
fn plots_are_the_same_at_any_thread_count() {
    let (one, _) = plot(&["search", "--threads", "1"]);
    let (four, _) = plot(&["search", "--threads", "4"]);
    assert_eq!(one, four);
    let tornado =
        |threads: &str| plot(&[&["search", "--threads", threads][..], &DETAILED_4096].concat());
    assert_eq!(tornado("1"), tornado("3"));
}

#[test]
fn a_plot_never_overwrites_the_brief_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let brief = dir.path().join("brief.json");
    std::fs::write(&brief, "{}").unwrap();
    let out = trainplan()
        .args(["search", "--brief"])
        .arg(&brief)
        .arg("--plot")
        .arg(&brief)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&brief).unwrap(), "{}");
}
