//! The grid walk: [`search`] weighs each shape's configurations, finds its windows and grades
//! the grid's token counts inside them, a block of shapes at a time, in parallel with rayon,
//! each worker keeping its own top-K list and front. **The search's hot loop is the `fold` in
//! [`search_in_blocks`]**: for each shape and token count of the grid it computes loss and
//! plate days once, then finds the passing prefix of the shape's configurations ordered by
//! pace. Without `--exact`, each shape is weighed, walked and its distinct choices found by one
//! worker ([`search_streaming`]).

use itertools::Either;
use rayon::prelude::*;

use crate::brief::Brief;
use crate::cost::run::plate as time;
use crate::cost::run::TimeModel;
use crate::cost::step_time::micro_batch::MicroBatchCache;
use crate::laws::ComputeOptimal;
use crate::model::Shape;
use crate::plan::limits::{config_loss, loss, loss_meets, within_time_and_cost};
use crate::plan::runnable::{detailed_grade, runnable_key, DetailedGrade};
use crate::plan::verdict::{fewest_tokens_on, time_bound};
use crate::plan::verdict::{loss_bound, ShapeVerdict};
use crate::plan::{evaluate_cached, Design, Plan};
use crate::search::distinct::distinct_firsts;
use crate::search::distinct::distinct_firsts_of_shape;
pub(crate) use crate::search::distinct::Choices;
pub(crate) use crate::search::options::SearchOptions;
use crate::search::options::TokenGrid;
use crate::search::pareto::{exact_front, last_on_front, Front};
use crate::search::progress::{stopping, Progress};
use crate::search::rank::{lifetime_flops, tie_break, Candidate, Distinct, Rank, TopK};
use crate::search::report::FrontRun;
use crate::search::report::FrontRuns;
use crate::search::report::SearchReport;
use crate::search::report::MAX_FRONT_RUNS;
use crate::search::space::Config;
use crate::search::space::MemorySpace;
use crate::search::weigh::order::memory_order;
use crate::search::weigh::order::pace_order;
use crate::search::weigh::order::pace_order_of;
use crate::search::weigh::scratch::Buffers;
use crate::search::weigh::scratch::SCRATCH;
use crate::search::weigh::shape_verdict;
use crate::search::weigh::weighed_configurations;
use crate::search::weigh::Fitting;
use crate::search::windows::better;
use crate::search::windows::exact_top;
use crate::search::windows::grid_range;
use crate::search::windows::windows;
use crate::search::windows::Found;
use crate::search::windows::Window;
use crate::search::windows::CHUNK;
use crate::units::gb;

/// Shapes searched at a time: the configurations of one block are held at once.
pub(crate) const BLOCK: usize = 4096;

/// Shapes searched at a time in a detailed space, where a shape has tens of thousands of
/// fitting configurations or more (every CP degree, precision and interleaving depth): a
/// block's configurations are what the search holds, so this keeps memory flat in the family.
const DETAILED_BLOCK: usize = 128;

/// The block size for `options`: [`BLOCK`] for the plate's few configurations a shape,
/// [`DETAILED_BLOCK`] for the detailed space.
pub(crate) fn block_for(options: &SearchOptions) -> usize {
    match options.memory {
        MemorySpace::Plate => BLOCK,
        MemorySpace::Detailed { .. } => DETAILED_BLOCK,
    }
}

/// Every shape's verdict and the configurations that fit it, in both orders. Each verdict
/// bounds, in closed form, the tokens with which any configuration can pass: fewer miss the
/// loss, more miss the days even at the fastest pace that fits.
fn shape_configurations(
    brief: &Brief,
    shapes: &[Shape],
    options: &SearchOptions,
    progress: &dyn Progress,
) -> (Vec<ShapeVerdict>, Vec<Fitting>) {
    shapes
        .par_iter()
        .map(|shape| {
            shape_configuration(brief, shape, options, false, Buffers::default(), progress)
        })
        .unzip()
}

/// One shape's verdict and the configurations that fit it, in both orders
/// ([`shape_configurations`]); incomplete once `progress` is [`stopping`].
fn shape_configuration(
    brief: &Brief,
    shape: &Shape,
    options: &SearchOptions,
    depths_by_pace: bool,
    buffers: Buffers,
    progress: &dyn Progress,
) -> (ShapeVerdict, Fitting) {
    // A configuration too slow to train the tokens the loss needs within the days
    // can be no plan at any token count (days grow with tokens): it is left out of
    // what the search walks, but for the fastest, which the verdict names.
    let needed = loss_bound(brief, shape).1;
    // A slower depth's batch is its step's, which the days a token kept of it do not say:
    // where the brief counts the critical batch every depth is kept whole.
    let depths_by_pace = depths_by_pace && brief.critical_batch.is_off();
    // `Pace::run_days` at those tokens, the plate's days worked out once.
    let plate_days = needed.map(|lo| {
        let days = time::days(
            brief.cluster_flops_per_second(),
            shape.active_params() as f64,
            lo as f64,
        );
        (lo, days)
    });
    let keep = |c: &Config| {
        plate_days.is_some_and(|(lo, days)| within_time_and_cost(brief, c.pace.days(days, lo)))
    };
    let mut weighed = SCRATCH.with_borrow_mut(|scratch| {
        weighed_configurations(
            brief,
            shape,
            &options.memory,
            &options.time,
            &keep,
            depths_by_pace,
            buffers,
            scratch,
            progress,
        )
    });
    let mut configs = std::mem::take(&mut weighed.fitting);
    let fastest = weighed.fastest;
    if let (true, Some(f)) = (configs.is_empty(), fastest) {
        configs.push(f);
    }
    // Two configurations are never equal in this order (the layout and step break
    // every tie), so an unstable sort gives the stable one's order.
    let mut order = pace_order_of(&configs);
    let first = order.first().map(|&i| &configs[i as usize]);
    let mut verdict = shape_verdict(brief, shape, &weighed, first, options);
    verdict.excluded = weighed.excluded;
    verdict.facets = weighed.tallies.facets(brief, shape);
    // Among layouts the plate grades equal, runnable first: each fitting layout of a
    // shape that can pass graded once by the detailed model (default stack and step).
    // The verdict does not depend on it: every plate configuration has the same pace.
    let plate = options.memory == MemorySpace::Plate && options.time == TimeModel::Plate;
    if plate && verdict.token_window.is_some() {
        for c in &mut configs {
            c.prefer = runnable_key(brief, &detailed_grade(brief, shape, &c.layout));
        }
        order.sort_by(|&a, &b| pace_order(&configs[a as usize], &configs[b as usize]));
    }
    // The memory order is needed only to rank by memory.
    let mut by_memory = match options.rank {
        Rank::Memory => configs.clone(),
        _ => Vec::new(),
    };
    by_memory.sort_by(memory_order);
    let (all, graded) = (weighed.all, weighed.graded);
    // Slower than a positive pace, so positive, where a double's bits order as its value.
    let mut slower = std::mem::take(&mut weighed.slower);
    slower.sort_unstable_by_key(|k| k.to_bits());
    let mut fitting = Fitting {
        configs,
        order,
        by_memory,
        slower,
        all,
        graded,
        by_batch: Vec::new(),
    };
    if !brief.critical_batch.is_off() {
        fitting.by_batch = fitting.split_by_batch();
        by_batch_verdict(brief, shape, &fitting.by_batch, &mut verdict);
    }
    (verdict, fitting)
}

/// A shape's verdict where the brief counts the critical batch: the loss bound is each global
/// batch's (`groups`, [`Fitting::split_by_batch`]), so the window runs from the fewest tokens
/// of any batch whose fastest configuration passes on them to the most of any; a shape none of
/// whose batches passes fails, and says at what batch it came nearest. The closed-form
/// verdict, at no batch, bounds it from outside: its window holds this one.
fn by_batch_verdict(brief: &Brief, shape: &Shape, groups: &[Fitting], verdict: &mut ShapeVerdict) {
    let Some(_) = verdict.token_window else {
        return;
    };
    let mut window: Option<[u64; 2]> = None;
    let mut days: Option<[f64; 2]> = None;
    // The batch that came nearest: its fewest tokens, the most it trains in time, its batch.
    let mut nearest: Option<(u64, u64, f64, Option<u64>)> = None;
    // Each batch's fastest configuration.
    for c in groups.iter().filter_map(|g| g.by_pace().next()) {
        let batch = c.global_batch();
        let Some(lo) = fewest_tokens_on(brief, shape, &c.model) else {
            continue;
        };
        let hi = time_bound(brief, shape, c.pace);
        let run_days = |t: u64| c.pace.run_days(brief, shape.active_params(), t);
        if lo > hi {
            let short = (lo - hi) as f64;
            if nearest.is_none_or(|(_, _, s, _)| short < s) {
                nearest = Some((lo, hi, short, batch));
            }
            continue;
        }
        window = Some(window.map_or([lo, hi], |[a, b]| [a.min(lo), b.max(hi)]));
        let d = [run_days(lo), run_days(hi)];
        days = Some(days.map_or(d, |[a, b]| [a.min(d[0]), b.max(d[1])]));
    }
    verdict.min_tokens_for_loss = window.map(|[lo, _]| lo).or(nearest.map(|(lo, ..)| lo));
    if let Some([_, hi]) = window {
        verdict.max_tokens_in_time = hi;
    }
    match (window, nearest) {
        (Some(w), _) => {
            verdict.token_window = Some(w);
            verdict.days_window = days;
        }
        (None, nearest) => {
            verdict.token_window = None;
            verdict.days_window = None;
            verdict.reason = Some(match nearest {
                None => format!(
                    "loss: at none of its layouts' global batches, past the critical batch, does it reach loss {}",
                    brief.loss_target
                ),
                Some((lo, hi, _, batch)) => {
                    let (check, limit) = match brief.binding_cost_limit() {
                        Some((limit, days)) => ("cost", format!(
                            "the {} cost limit ({} days) allows",
                            crate::format::money(limit),
                            crate::format::fixed(days, 1)
                        )),
                        None => ("days", format!("{} days allow", crate::format::fixed(brief.max_days, 1))),
                    };
                    let batch = batch.map_or_else(
                        || "the plate's batch".to_string(),
                        |b| format!("{} tokens a step", crate::format::count(b as f64)),
                    );
                    format!(
                        "{check}: past the critical batch, reaching loss {} takes at least {} tokens (its nearest layouts, at {batch}), but {limit} only {} at their pace",
                        brief.loss_target,
                        crate::format::count(lo as f64),
                        crate::format::count(hi as f64)
                    )
                }
            });
        }
    }
}

/// The work of a block of shapes starting at `offset`: each shape's grid counts inside its
/// window, in chunks. Only these are graded one by one; the rest fail exactly as the window
/// says (the property tests compare with grading everything).
fn window_work(
    grid: &TokenGrid,
    verdicts: &[ShapeVerdict],
    offset: usize,
) -> Vec<(usize, u64, u64)> {
    verdicts
        .iter()
        .enumerate()
        .filter_map(|(s, v)| Some((offset + s, grid_range(grid, v.token_window?))))
        .flat_map(|(s, range)| {
            let chunks = (range.end - range.start).div_ceil(CHUNK);
            (0..chunks).map(move |c| {
                let first = range.start + c * CHUNK;
                (s, first, (first + CHUNK).min(range.end))
            })
        })
        .collect()
}

/// The front's points (sorted by days) thinned, when asked, to each distinct choice's best
/// under `rank`, still sorted by days.
pub(crate) fn thin_front(
    points: Vec<Candidate>,
    rank: Rank,
    distinct: Distinct,
    thin: bool,
) -> Vec<Candidate> {
    if !thin || distinct == Distinct::Plan {
        return points;
    }
    let mut kept: Vec<Candidate> = Vec::new();
    for c in &points {
        match kept.iter_mut().find(|k| distinct.same(k, c)) {
            Some(k) if rank.compare(c, k).is_lt() => *k = *c,
            Some(_) => {}
            None => kept.push(*c),
        }
    }
    kept.sort_by(|a, b| a.days.total_cmp(&b.days).then_with(|| tie_break(a, b)));
    kept
}

/// The full plan of a passing candidate, graded again by [`evaluate`] (`micro_batches`: each
/// shape's micro-batches, worked out once for all the plans graded).
fn grade(
    brief: &Brief,
    shapes: &[Shape],
    time: &TimeModel,
    c: &Candidate,
    micro_batches: &MicroBatches,
) -> Plan {
    let shape = &shapes[c.shape];
    grade_with(brief, shape, time, c, micro_batches, &|| {
        detailed_grade(brief, shape, &c.layout).map_err(|e| e.to_string())
    })
}

/// The most tokens the detailed model passes a shape's best plate plan `p` on in time, where
/// it fits `p`'s layout but runs `p` past the day or cost limit and those tokens still reach
/// the loss target (`v`'s window): its runnable days are linear in the tokens, so the count is
/// `⌊days limit / days per token⌋`.
fn in_time_under_detailed(brief: &Brief, v: &ShapeVerdict, p: &Plan) -> Option<u64> {
    let r = p.runnable.as_ref()?;
    let (days, per_token) = (r.days?, r.days_per_token?);
    let limit = brief.days_limit();
    if !r.fits || days <= limit || per_token <= 0.0 {
        return None;
    }
    let [lo, _] = v.token_window?;
    let tokens = (limit / per_token).floor() as u64;
    (tokens >= lo && tokens < p.tokens).then_some(tokens)
}

/// Each shape's [`MicroBatchCache`] (by its place) for grading many plans: a front holds many
/// token counts of few configurations.
pub(crate) type MicroBatches = std::cell::RefCell<crate::hash::FastMap<usize, MicroBatchCache>>;

/// [`grade`], a plate plan's detailed grade (its `runnable`) from `detailed`.
pub(crate) fn grade_with(
    brief: &Brief,
    shape: &Shape,
    time: &TimeModel,
    c: &Candidate,
    micro_batches: &MicroBatches,
    detailed: &dyn Fn() -> std::result::Result<DetailedGrade, String>,
) -> Plan {
    let design = Design {
        shape,
        tokens: c.tokens,
        layout: c.layout,
        memory: c.model,
        time,
    };
    let mut caches = micro_batches.borrow_mut();
    let cache = caches.entry(c.shape).or_default();
    let plan = evaluate_cached(brief, &design, detailed, Some(cache))
        .expect("configurations() kept only valid steps");
    debug_assert!(plan.pass && plan.loss == c.loss && plan.days == c.days);
    plan
}

/// Grades the grid's token counts `range` of shape `s` (`fit` its configurations that can
/// pass) into `found` (`local`: the shape's place in `found.best`): the passing count, the
/// top plans, the shape's best and the front's candidates.
#[allow(clippy::too_many_arguments)]
fn walk_grid(
    brief: &Brief,
    shape: &Shape,
    s: usize,
    fit: &Fitting,
    range: std::ops::Range<u64>,
    options: &SearchOptions,
    found: &mut Found,
    local: usize,
) {
    if brief.critical_batch.is_off() {
        return walk_grid_at(brief, shape, s, fit, range, options, found, local, None);
    }
    // Where the brief counts the critical batch the loss is also the batch's: the walk is the
    // same over each global batch's configurations, which share it (the plate's share the
    // plate's batch).
    for group in &fit.by_batch {
        let model = group.configs[0].model;
        walk_grid_at(
            brief,
            shape,
            s,
            group,
            range.clone(),
            options,
            found,
            local,
            Some(&model),
        );
    }
}

/// [`walk_grid`] over configurations that share their loss: the shape's (`memory` `None`), or
/// where the brief counts the critical batch, those of `memory`'s global batch.
#[allow(clippy::too_many_arguments)]
fn walk_grid_at(
    brief: &Brief,
    shape: &Shape,
    s: usize,
    fit: &Fitting,
    range: std::ops::Range<u64>,
    options: &SearchOptions,
    found: &mut Found,
    local: usize,
    memory: Option<&crate::cost::memory::MemoryModel>,
) {
    let grid = options.grid;
    let top = options.top.unwrap_or(usize::MAX);
    let cluster_flops = brief.cluster_flops_per_second();
    let n = shape.active_params() as f64;
    for i in range {
        let tokens = grid.at(i);
        let loss = match memory {
            None => loss(brief, shape, tokens),
            Some(m) => config_loss(brief, shape, tokens, m),
        };
        if !loss_meets(brief, loss) {
            continue;
        }
        let plate_days = time::days(cluster_flops, n, tokens as f64);
        let lifetime = lifetime_flops(brief, shape, tokens);
        let days_of = |c: &Config| c.pace.days(plate_days, tokens);
        // Days rise with the pace, so the configurations that pass are a prefix of
        // `by_pace`. They share the loss; under any ranking but memory they come in
        // `by_pace`'s order, so only the first `top` can be among the best, and only the
        // first (fewest days) can stand on the front.
        let passing = fit
            .order
            .partition_point(|&i| within_time_and_cost(brief, days_of(&fit.configs[i as usize])));
        if passing == 0 {
            continue;
        }
        let candidate = |c: &Config| Candidate {
            shape: s,
            tokens,
            layout: c.layout,
            model: c.model,
            loss,
            days: days_of(c),
            memory: gb(c.bytes),
            prefer: c.prefer,
            lifetime,
        };
        // Under --exact the ranking and each shape's best come from the windows; only the
        // grid's front and count are wanted from this loop.
        if !options.exact {
            let mut best = if options.rank == Rank::Memory {
                let fits = fit
                    .by_memory
                    .iter()
                    .filter(|c| within_time_and_cost(brief, days_of(c)));
                Either::Left(fits.take(top).map(candidate))
            } else {
                Either::Right(fit.by_pace().take(passing.min(top)).map(candidate))
            };
            let first_best = best.next();
            if let Some(c) = first_best {
                found.top.push(c);
            }
            best.for_each(|c| found.top.push(c));
            found.best[local] = better(options.rank, found.best[local], first_best);
        }
        found
            .front
            .insert(candidate(&fit.configs[fit.order[0] as usize]));
        // The slower depths pass where their days do, `t·k` as `Pace::days` reckons them.
        let slower = fit
            .slower
            .partition_point(|&k| within_time_and_cost(brief, tokens as f64 * k));
        found.passing += (passing + slower) as u64;
    }
}

/// Searches a block of shapes at once, in one go: each shape's configurations are weighed, its
/// grid walked and its distinct choices found by the same worker, and then let go, so nothing
/// waits on a whole block and memory holds the workers' shapes only. What it gives is what the
/// block-by-block search gives (the merges are order-free); it serves the searches that keep
/// nothing of a shape's configurations once walked (not `--exact`, not merged windows, and
/// `--distinct` only where [`distinct_firsts_of_shape`] answers).
fn search_streaming(
    brief: &Brief,
    shapes: &[Shape],
    options: &SearchOptions,
    progress: &dyn Progress,
) -> Streamed {
    let grid = options.grid;
    let empty = || Streamed {
        found: Found {
            top: TopK::new(options.rank, options.top),
            front: Front::new(),
            passing: 0,
            best: Vec::new(),
        },
        best: Vec::new(),
        verdicts: Vec::new(),
        distinct: TopK::new(options.rank, options.top),
        choices: 0,
        evaluated: 0,
        configurations: 0,
        graded: 0,
        scratch: Choices::default(),
    };
    let mut streamed = shapes
        .par_iter()
        .enumerate()
        .fold(empty, |mut acc, (s, shape)| {
            if stopping(progress) {
                return acc;
            }
            let buffers = Buffers::take();
            // A slower depth can be in a top list of plans (`--distinct plan`) but for the
            // first, or the lightest under the memory ranking.
            let depths_by_pace = options.rank != Rank::Memory
                && (options.distinct != Distinct::Plan || options.top == Some(1));
            let (verdict, fit) =
                shape_configuration(brief, shape, options, depths_by_pace, buffers, progress);
            acc.evaluated = acc
                .evaluated
                .saturating_add(fit.all.saturating_mul(grid.len()));
            acc.configurations += fit.all;
            acc.graded += fit.graded;
            if let Some(window) = verdict.token_window {
                acc.found.best.push(None);
                walk_grid(
                    brief,
                    shape,
                    s,
                    &fit,
                    grid_range(&grid, window),
                    options,
                    &mut acc.found,
                    0,
                );
                if let Some(best) = acc.found.best.pop().flatten() {
                    acc.best.push((s, best));
                }
            }
            if options.distinct != Distinct::Plan {
                for c in distinct_firsts_of_shape(
                    brief,
                    shape,
                    &fit,
                    s,
                    &grid,
                    options.rank,
                    options.distinct,
                    &mut acc.scratch,
                ) {
                    acc.choices += 1;
                    acc.distinct.push(c);
                }
            }
            acc.verdicts.push((s, verdict));
            Buffers {
                configs: fit.configs,
                slower: fit.slower,
            }
            .keep();
            progress.advance(1);
            acc
        })
        .reduce(empty, Streamed::merge);
    streamed.verdicts.sort_unstable_by_key(|(s, _)| *s);
    // Stopped part way, the report is of the shapes searched from the first on, as a search
    // by blocks stops.
    let searched = streamed
        .verdicts
        .iter()
        .enumerate()
        .take_while(|(i, (s, _))| i == s)
        .count();
    streamed.verdicts.truncate(searched);
    streamed
}

/// What [`search_streaming`] gathers: the grid's plans, each shape's best and verdict (by its
/// place), the distinct choices and the counts.
struct Streamed {
    found: Found,
    best: Vec<(usize, Candidate)>,
    verdicts: Vec<(usize, ShapeVerdict)>,
    distinct: TopK,
    choices: u64,
    evaluated: u64,
    configurations: u64,
    graded: u64,
    /// The worker's table for [`distinct_firsts_of_shape`].
    scratch: Choices,
}

impl Streamed {
    pub(crate) fn merge(mut self, other: Streamed) -> Streamed {
        self.found = self.found.merge(other.found);
        self.best.extend(other.best);
        self.verdicts.extend(other.verdicts);
        self.distinct = self.distinct.merge(other.distinct);
        self.choices += other.choices;
        self.evaluated = self.evaluated.saturating_add(other.evaluated);
        self.configurations += other.configurations;
        self.graded += other.graded;
        self
    }
}

/// [`search`], gone exact where the grid would list nothing a verdict says passes: a search
/// with no passing plan on the grid while a shape passes on a window no grid count falls in
/// (1.733 T – 1.736 T between two counts 10 B apart) is searched again over every whole token
/// count of the windows, as `--exact` does, and the reason comes back to be said. A search that
/// lists plans keeps its grid (a family sweep's narrow windows do not turn it exact), and one
/// that asks for every plan (no top) is not made exact, only told how to see the window's.
pub fn search_listing(
    brief: &Brief,
    shapes: &[Shape],
    options: &SearchOptions,
    progress: &dyn Progress,
) -> (SearchReport, Option<String>) {
    let report = search(brief, shapes, options, progress);
    if options.exact || report.any_pass() {
        return (report, None);
    }
    if options.top.is_none() {
        // Every plan asked for (`--all`): exact windows hold too many whole counts to list,
        // so the reason comes back with the way to see them.
        let why = report.unlisted();
        return (report, why);
    }
    match report.off_grid() {
        Some(why) => {
            let exact = SearchOptions {
                exact: true,
                ..options.clone()
            };
            let report = search(brief, shapes, &exact, progress);
            let why = format!(
                "{why}: ranked over every whole token count of the windows, as --exact does"
            );
            (report, Some(why))
        }
        None => (report, None),
    }
}

/// Searches every shape in `shapes` under `brief` (which must be valid) on the current rayon
/// thread pool, reporting progress in shapes searched.
pub fn search(
    brief: &Brief,
    shapes: &[Shape],
    options: &SearchOptions,
    progress: &dyn Progress,
) -> SearchReport {
    search_in_blocks(brief, shapes, options, progress, block_for(options), false).0
}

/// [`search`], `block` shapes at a time; with `keep_windows`, also every fitting
/// configuration's exact window (for [`search_all`]).
pub(crate) fn search_in_blocks<'a>(
    brief: &'a Brief,
    shapes: &'a [Shape],
    options: &SearchOptions,
    progress: &dyn Progress,
    block_size: usize,
    keep_windows: bool,
) -> (SearchReport, Vec<Window<'a>>) {
    let grid = options.grid;
    let top = options.top.unwrap_or(usize::MAX);
    // Shapes are searched a block at a time, so memory holds one block's configurations and
    // grows with the shapes' verdicts and best plans only, however large the family.
    let mut verdicts: Vec<ShapeVerdict> = Vec::with_capacity(shapes.len());
    let mut found = Found {
        top: TopK::new(options.rank, options.top),
        front: Front::new(),
        passing: 0,
        best: vec![None; shapes.len()],
    };
    let mut exact = TopK::new(options.rank, options.top);
    let mut distinct = TopK::new(options.rank, options.top);
    let mut choices = 0u64;
    let mut exact_windows = Vec::new();
    let mut kept = Vec::new();
    let mut evaluated = 0u64;
    let (mut configurations, mut graded) = (0u64, 0u64);
    progress.start(shapes.len() as u64);
    // Whether each shape can be searched whole by one worker and let go.
    let streaming = !options.exact
        && !keep_windows
        && (options.distinct == Distinct::Plan || options.rank != Rank::Memory);
    if streaming {
        let streamed = search_streaming(brief, shapes, options, progress);
        verdicts.extend(streamed.verdicts.into_iter().map(|(_, v)| v));
        found.top = streamed.found.top;
        found.front = streamed.found.front;
        found.passing = streamed.found.passing;
        for (s, best) in streamed.best {
            found.best[s] = Some(best);
        }
        distinct = streamed.distinct;
        choices = streamed.choices;
        evaluated = streamed.evaluated;
        configurations = streamed.configurations;
        graded = streamed.graded;
    }
    // By blocks, where the search keeps what a block's configurations give (`--exact`, merged
    // windows, a distinct ranking by memory).
    let by_blocks = if streaming { 0 } else { shapes.len() };
    for block in (0..by_blocks).step_by(block_size.max(1)) {
        if stopping(progress) {
            break;
        }
        let block = block..(block + block_size.max(1)).min(shapes.len());
        let (block_verdicts, fitting) =
            shape_configurations(brief, &shapes[block.clone()], options, progress);
        evaluated = fitting.iter().fold(evaluated, |n, f| {
            n.saturating_add(f.all.saturating_mul(grid.len()))
        });
        configurations += fitting.iter().map(|f| f.all).sum::<u64>();
        graded += fitting.iter().map(|f| f.graded).sum::<u64>();
        let work = window_work(&grid, &block_verdicts, block.start);
        let empty = || Found {
            top: TopK::new(options.rank, options.top),
            front: Front::new(),
            passing: 0,
            best: vec![None; block.len()],
        };
        let part = work
            .par_iter()
            .fold(empty, |mut found, &(s, first, last)| {
                let local = s - block.start;
                let fit = &fitting[local];
                walk_grid(
                    brief,
                    &shapes[s],
                    s,
                    fit,
                    first..last,
                    options,
                    &mut found,
                    local,
                );
                found
            })
            .reduce(empty, Found::merge);
        found.top = found.top.merge(part.top);
        found.front = found.front.merge(part.front);
        found.passing += part.passing;
        for (global, best) in found.best[block.clone()].iter_mut().zip(part.best) {
            *global = better(options.rank, *global, best);
        }
        if keep_windows {
            kept.extend(windows(
                brief,
                &shapes[block.clone()],
                &fitting,
                block.start,
            ));
        }
        if options.distinct != Distinct::Plan && !options.exact && options.rank != Rank::Memory {
            let firsts: Vec<Vec<Candidate>> = shapes[block.clone()]
                .par_iter()
                .zip(&fitting)
                .enumerate()
                .map(|(s, (shape, fit))| {
                    distinct_firsts_of_shape(
                        brief,
                        shape,
                        fit,
                        block.start + s,
                        &grid,
                        options.rank,
                        options.distinct,
                        &mut Choices::default(),
                    )
                })
                .collect();
            // Choices are per shape, so the shapes' firsts are the block's.
            for c in firsts.into_iter().flatten() {
                choices += 1;
                distinct.push(c);
            }
        } else if options.distinct != Distinct::Plan {
            let block_windows = windows(brief, &shapes[block.clone()], &fitting, block.start);
            let firsts = distinct_firsts(
                &block_windows,
                &grid,
                options.rank,
                options.exact,
                options.distinct,
            );
            choices += firsts.len() as u64;
            firsts.into_iter().for_each(|c| distinct.push(c));
        }
        if options.exact {
            let block_windows = windows(brief, &shapes[block.clone()], &fitting, block.start);
            let (plans, best) = exact_top(&block_windows, options.rank, top, block.clone());
            plans.into_iter().for_each(|c| exact.push(c));
            found.best[block.clone()].copy_from_slice(&best);
            // Only each shape's fastest configuration can stand on the front (each global
            // batch's, where the brief counts the critical batch: a slower one with a smaller
            // batch reaches a lower loss).
            let mut seen = std::collections::HashSet::new();
            exact_windows.extend(
                block_windows
                    .into_iter()
                    .filter(|w| seen.insert((w.index, w.batch_key()))),
            );
        }
        verdicts.extend(block_verdicts);
        progress.advance(block.len() as u64);
    }
    progress.finish();

    let micro_batches = MicroBatches::default();
    let grade = |c: &Candidate| grade(brief, shapes, &options.time, c, &micro_batches);
    let budget_flops = brief.budget_flops();
    let plans = if options.distinct != Distinct::Plan {
        distinct.into_sorted()
    } else if options.exact {
        exact.into_sorted()
    } else {
        found.top.into_sorted()
    };
    let best = found.best;
    let front_runs = options.exact.then(|| {
        let tie = |(a, ta): (usize, u64), (b, tb): (usize, u64)| {
            tie_break(
                &exact_windows[a].candidate(ta),
                &exact_windows[b].candidate(tb),
            )
        };
        let front = exact_front(&exact_windows, tie, MAX_FRONT_RUNS);
        FrontRuns {
            runs: front
                .runs
                .iter()
                .map(|run| {
                    let window = &exact_windows[run.chain];
                    FrontRun {
                        first: grade(&window.candidate(run.first)),
                        last: grade(&window.candidate(last_on_front(window, run))),
                        days_per_token: window.pace.days_per_token(),
                    }
                })
                .collect(),
            complete: front.complete,
        }
    });
    let report = SearchReport {
        brief: brief.clone(),
        grid,
        rank: options.rank,
        exact: options.exact,
        budget_flops,
        compute_optimal: ComputeOptimal::for_budget(
            &brief.loss_law,
            budget_flops,
            brief.unique_tokens.map(|u| u as f64),
        ),
        shapes: verdicts
            .into_iter()
            .zip(&best)
            .map(|(mut v, best)| {
                let Some(c) = best else {
                    return v;
                };
                // One detailed grade of the layout, for the best plan and its sooner one.
                let shape = &shapes[c.shape];
                let detailed = std::cell::OnceCell::new();
                let detailed = || {
                    detailed
                        .get_or_init(|| {
                            detailed_grade(brief, shape, &c.layout).map_err(|e| e.to_string())
                        })
                        .clone()
                };
                let p = grade_with(brief, shape, &options.time, c, &micro_batches, &detailed);
                v.detailed_best = in_time_under_detailed(brief, &v, &p).and_then(|tokens| {
                    let design = Design {
                        shape,
                        tokens,
                        layout: c.layout,
                        memory: c.model,
                        time: &options.time,
                    };
                    crate::plan::evaluate_graded(brief, &design, &detailed).ok()
                });
                v.best_plan = Some(p);
                v
            })
            .collect(),
        distinct: options.distinct,
        choices: if options.distinct == Distinct::Plan {
            found.passing
        } else {
            choices
        },
        plans: plans.iter().map(grade).collect(),
        front: thin_front(
            found.front.into_points(),
            options.rank,
            options.distinct,
            options.distinct_front,
        )
        .iter()
        .map(grade)
        .collect(),
        front_runs,
        evaluated,
        configurations,
        graded: Some(graded),
        passing: found.passing,
        sensitivity: None,
        commands: None,
    };
    (report, kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::step::detailed::Options;
    use crate::cost::step::stack::Stack;
    use crate::model::presets;
    use crate::search::all::tests::plateau_brief;
    use crate::search::progress::Silent;
    use itertools::iproduct;

    #[test]
    fn searching_a_block_at_a_time_changes_nothing() {
        use crate::model::family::Family;
        use crate::report::export::Format;
        let family = Family::llama("40..120:20", "8192..16384:2048", "3..4:0.5").unwrap();
        let mut shapes = presets();
        shapes.extend(family.shapes().unwrap());
        let b = Brief::default();
        for exact in [false, true] {
            let options = SearchOptions {
                exact,
                top: Some(7),
                ..SearchOptions::default()
            };
            let json = |block| {
                let (r, _) = search_in_blocks(&b, &shapes, &options, &Silent, block, false);
                let e = Format::Json.exporter();
                (e.search(&r).unwrap(), e.front(&r).unwrap())
            };
            assert_eq!(json(1), json(BLOCK));
            assert_eq!(json(4), json(BLOCK));
        }
    }

    #[test]
    fn two_shapes_of_one_size_give_the_front_of_one() {
        // Equal parameter counts make equal curves; the exact front must not crawl along them a
        // token at a time, and the tie goes to the first shape.
        let seventy = crate::model::preset("70b").unwrap();
        let twin = Shape {
            name: "twin".into(),
            ..seventy.clone()
        };
        let options = SearchOptions {
            exact: true,
            top: Some(1),
            ..SearchOptions::default()
        };
        let alone = search(
            &Brief::default(),
            std::slice::from_ref(&seventy),
            &options,
            &Silent,
        );
        let both = search(&Brief::default(), &[seventy, twin], &options, &Silent);
        let runs = |r: &SearchReport| {
            let f = r.front_runs.as_ref().unwrap();
            assert!(f.complete);
            f.runs
                .iter()
                .map(|run| (run.first.model.clone(), run.first.tokens, run.last.tokens))
                .collect::<Vec<_>>()
        };
        assert_eq!(runs(&both), runs(&alone));
        assert_eq!(runs(&both).len(), 1);
    }

    #[test]
    fn a_search_after_others_on_the_same_thread_gives_what_it_gives_on_a_fresh_one() {
        // Each thread keeps its buffers and scratch from search to search: a search of 70B
        // after searches of a larger family and of another brief, on the same thread, reports
        // byte for byte what it reports on a thread that has searched nothing.
        use crate::model::family::Family;
        use crate::report::export::Format;
        let stack = Stack::MegatronTe;
        let options = |b: &Brief| SearchOptions {
            memory: MemorySpace::detailed_defaults(b, Options::for_stack(stack)),
            time: TimeModel::Detailed(crate::cost::step_time::options::TimeOptions::for_stack(
                stack,
            )),
            top: Some(3),
            ..SearchOptions::default()
        };
        let brief = Brief {
            gpus: 2048,
            ..Brief::default()
        };
        let small = Brief {
            gpus: 512,
            ..Brief::default()
        };
        let family = Family::llama("40..120:40", "8192..16384:8192", "3..4:1")
            .unwrap()
            .shapes()
            .unwrap();
        let seventy = [crate::model::preset("70b").unwrap()];
        let json = |b: &Brief, shapes: &[Shape]| {
            let r = search(b, shapes, &options(b), &Silent);
            Format::Json.exporter().search(&r).unwrap()
        };
        let one_thread = || {
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap()
        };
        let fresh = one_thread().install(|| json(&brief, &seventy));
        let after = one_thread().install(|| {
            json(&brief, &family);
            json(&small, &seventy);
            json(&brief, &seventy)
        });
        assert_eq!(after, fresh);
    }

    /// Llama 3 8B on 2^20 GPUs for a year at a 2.0 loss target passes near 10^15 tokens and
    /// beyond, where `f64` rounds runs of neighbouring token counts to one loss.
    #[test]
    fn each_shape_searched_whole_by_one_worker_gives_what_the_blocks_give() {
        // The streaming search (each shape weighed, walked and its distinct choices found by
        // [`distinct_firsts_of_shape`]) against the block search, which walks every
        // configuration's line (`keep_windows` keeps it on that path): the same report, byte
        // for byte, on a small family in the detailed space, by every ranking it serves and
        // each kind of distinct choice; and on the plate's space with its loss plateaus.
        use crate::model::family::Family;
        use crate::report::export::Format;
        let family = Family::llama("40..120:40", "8192..16384:8192", "3..4:1").unwrap();
        let mut shapes = presets();
        shapes.extend(family.shapes().unwrap());
        let detailed = |b: &Brief| {
            let options = Options::for_stack(Stack::MegatronTe);
            (
                MemorySpace::detailed_defaults(b, options),
                TimeModel::Detailed(crate::cost::step_time::options::TimeOptions::for_stack(
                    Stack::MegatronTe,
                )),
            )
        };
        let mut priced = Brief::default();
        priced.spend.price_per_gpu_hour = Some(2.0);
        for (b, (memory, time)) in [
            (priced.clone(), detailed(&priced)),
            (plateau_brief(), (MemorySpace::Plate, TimeModel::Plate)),
        ] {
            for (rank, distinct, top) in iproduct!(
                [Rank::Loss, Rank::Days, Rank::Cost],
                [Distinct::Plan, Distinct::Layout, Distinct::Shape],
                [Some(1), Some(40)]
            ) {
                let options = SearchOptions {
                    rank,
                    distinct,
                    top,
                    memory: memory.clone(),
                    time: time.clone(),
                    ..SearchOptions::default()
                };
                let json = |keep_windows| {
                    let (r, _) = search_in_blocks(&b, &shapes, &options, &Silent, 4, keep_windows);
                    let e = Format::Json.exporter();
                    (
                        e.search(&r).unwrap(),
                        e.front(&r).unwrap(),
                        r.configurations,
                    )
                };
                let streamed = json(false);
                assert!(streamed.2 > 0);
                assert_eq!(streamed, json(true), "{rank:?} {distinct:?} {top:?}");
            }
        }
    }

    #[test]
    fn the_default_search_grades_every_candidate_and_the_best_is_70b_at_the_month_s_end() {
        let r = search(
            &Brief::default(),
            &presets(),
            &SearchOptions::default(),
            &Silent,
        );
        // 5,000 token counts × (8B: 4 TP × 6 PP × 4 ZeRO + 70B: 4 × 7 × 4 + 405B: 4 × 7 × 4).
        assert_eq!(r.evaluated, 5000 * (96 + 112 + 112));
        assert_eq!(r.plans.len(), 10);
        let best = &r.plans[0];
        assert_eq!(
            (best.model.as_str(), best.tokens),
            ("llama3-70b", 4_960_000_000_000)
        );
        assert!(r.plans.iter().all(|p| p.pass));
    }
}
