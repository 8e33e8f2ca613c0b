//! SPEC.md, read as tests: the numbers the seed states, the parameter counts, and the computed
//! verdict for each shape under the default brief. Expected values were worked out
//! independently (by hand or in Python from the formulas in SPEC.md), not read off the tool.

use trainplan::laws::ComputeOptimal;
use trainplan::model::layout::{Layout, ZeroStage};
use trainplan::model::{preset, presets};
use trainplan::plan::check::check;
use trainplan::plan::pace::Pace;
use trainplan::plan::verdict::{plate_lightest, verdict, ShapeVerdict};
use trainplan::plan::Design;
use trainplan::search::progress::Silent;
use trainplan::search::{search, SearchOptions};
use trainplan::Brief;

/// The verdict on a preset under the default brief and the plate model.
fn plate_verdict(model: &str) -> ShapeVerdict {
    let (brief, shape) = (Brief::default(), preset(model).unwrap());
    verdict(&brief, &shape, plate_lightest(&brief, &shape), Pace::Plate)
}

fn within(x: f64, want: f64, rel: f64) -> bool {
    ((x - want) / want).abs() <= rel
}

#[test]
fn the_parameter_counts_are_those_of_the_published_checkpoints() {
    let n: Vec<(String, u64)> = presets()
        .into_iter()
        .map(|s| (s.name.clone(), s.params()))
        .collect();
    assert_eq!(
        n,
        [
            ("llama3-8b".to_string(), 8_030_261_248),
            ("llama3-70b".to_string(), 70_553_706_496),
            ("llama3-405b".to_string(), 405_853_388_800),
        ]
    );
}

#[test]
fn the_starting_plan_needs_about_1140_gb_per_gpu_and_about_91_days() {
    let brief = Brief::default();
    let shape = preset("70b").unwrap();
    let layout = Layout::new(&brief, &shape, 1, 1, ZeroStage::new(0).unwrap()).unwrap();
    let r = check(&brief, &Design::plate(&shape, 15_000_000_000_000, layout)).unwrap();
    // 16 × 70,553,706,496 B + 2 × 8192 × 8192 × 80 B = 1,139.6 GB.
    assert!(within(r.plan.memory_gb.total, 1_139.596_722_176, 1e-12));
    // 6 × 70,553,706,496 × 15e12 / (2048 × 989e12 × 0.4 × 86,400) = 90.7115 days.
    assert!(within(r.plan.days, 90.711_503_623, 1e-9));
    assert_eq!(
        (r.plan.checks.memory, r.plan.checks.days, r.plan.checks.loss),
        (false, false, true)
    );
}

#[test]
fn the_budget_is_about_2_10e24_flops() {
    assert!(within(
        Brief::default().budget_flops(),
        2.100_009_369_6e24,
        1e-12
    ));
}

#[test]
fn the_compute_optimal_model_for_the_budget_has_about_140_billion_parameters() {
    let b = Brief::default();
    let opt = ComputeOptimal::for_budget(&b.loss_law, b.budget_flops(), None);
    assert!(within(opt.params as f64, 140e9, 0.01), "{}", opt.params);
}

// What each shape can do under the default brief. The loss floors and windows were worked in
// Python from L = 1.82 + 482/N^0.348 + 2085/D^0.366 and D_max = C / 6N.

#[test]
fn llama3_8b_can_never_pass_its_loss_floor_is_1_9923() {
    let v = plate_verdict("8b");
    assert!((v.loss_floor - 1.992_266_6).abs() < 1e-6);
    assert_eq!(v.token_window, None);
}

#[test]
fn llama3_70b_passes_from_3_381t_to_4_961t_tokens() {
    let v = plate_verdict("70b");
    // D_lo = (2085 / (1.955 − 1.9008653))^(1/0.366) = 3,380,993,485,051.3 → rounded up;
    // D_hi = 2.1000093696e24 / (6 × 70,553,706,496) = 4,960,782,062,099.6 → rounded down.
    assert_eq!(v.token_window, Some([3_380_993_485_052, 4_960_782_062_099]));
    let [d_lo, d_hi] = v.days_window.unwrap();
    assert!((d_lo - 20.446_33).abs() < 1e-4 && (d_hi - 30.0).abs() < 1e-9);
}

#[test]
fn llama3_405b_passes_but_only_from_817_7b_to_862_4b_tokens_at_the_end_of_the_month() {
    let v = plate_verdict("405b");
    // D_lo = 817,690,567,285.9 → 817,690,567,286; D_hi = 862,384,228,538.4 → 862,384,228,538.
    assert_eq!(v.token_window, Some([817_690_567_286, 862_384_228_538]));
    assert!((v.days_window.unwrap()[0] - 28.445_23).abs() < 1e-4);
}

#[test]
fn every_shape_fits_in_memory_with_some_layout() {
    for s in presets() {
        let v = plate_verdict(&s.name);
        assert!(v.min_memory_gb.unwrap() < 72.0, "{}", s.name);
    }
}

#[test]
fn the_best_plan_by_loss_is_70b_on_the_last_grid_point_the_month_allows() {
    let r = search(
        &Brief::default(),
        &presets(),
        &SearchOptions::default(),
        &Silent,
    );
    let best = &r.plans[0];
    assert_eq!(best.model, "llama3-70b");
    assert_eq!(best.tokens, 4_960_000_000_000);
    // L = 1.82 + 482/N^0.348 + 2085/4.96e12^0.366 = 1.9479153 (worked in Python).
    assert!((best.loss - 1.947_915_3).abs() < 1e-7, "{}", best.loss);
}

#[test]
fn the_front_holds_every_70b_grid_point_in_its_window_and_no_405b() {
    let r = search(
        &Brief::default(),
        &presets(),
        &SearchOptions::default(),
        &Silent,
    );
    // 70B passes on the grid from 3.39e12 to 4.96e12 in steps of 1e10: 158 points. Each 405B
    // point is beaten by a 70B point of fewer days and lower loss.
    assert_eq!(r.front.len(), 158);
    assert!(r.front.iter().all(|p| p.model == "llama3-70b"));
    assert_eq!(r.front[0].tokens, 3_390_000_000_000);
    assert_eq!(r.front[157].tokens, 4_960_000_000_000);
}
