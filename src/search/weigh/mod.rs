//! The detailed space's weighing: a shape's configurations weighed memory first and timed
//! only where they fit the cap ([`weighed_configurations`]), what a layout's steps share worked
//! out once ([`shared`]), configurations decided over the cap unweighed by proven bounds
//! ([`bounds`]), each CP degree's and precision's tally ([`tallies`]), the orders kept
//! ([`order`]) and each thread's buffers ([`scratch`]); the fitting configurations ordered by
//! pace ([`Fitting`]) and the shape's verdict when none fits.

pub(crate) mod bounds;
pub(crate) mod order;
pub(crate) mod scratch;
pub(crate) mod shared;
pub(crate) mod tallies;

use itertools::iproduct;

use crate::brief::Brief;
use crate::cost::memory::buffers::userbuffers;
use crate::cost::memory::MemoryModel;
use crate::cost::run::TimeModel;
use crate::cost::step::detailed::Detailed;
use crate::cost::step::pipeline::stage_kinds;
use crate::cost::step::{BatchTarget, Schedule};
use crate::model::Shape;
use crate::plan::limits::memory_fits;
use crate::plan::pace::Pace;
use crate::plan::verdict::{verdict_because, Exclusion, Exclusions, Lightest, ShapeVerdict};
use crate::search::options::SearchOptions;
use crate::search::progress::{until_stopped, Progress};
use crate::search::space::for_each_configuration;
use crate::search::space::Config;
pub(crate) use crate::search::space::MemorySpace;
use crate::search::weigh::bounds::decide_depths;
use crate::search::weigh::bounds::slower_than;
use crate::search::weigh::order::lighten;
use crate::search::weigh::order::quicken;
use crate::search::weigh::scratch::is_depth;
use crate::search::weigh::scratch::Buffers;
use crate::search::weigh::scratch::Kept;
use crate::search::weigh::scratch::Scratch;
use crate::search::weigh::shared::slot_pace;
use crate::search::weigh::tallies::Tallies;

/// What the search keeps of a shape's configurations: those that fit in memory (with their
/// pace), how many there are in all, the lightest, and the rules that left others out.
pub(crate) struct Weighed {
    /// The configurations that fit in memory and were kept.
    pub(crate) fitting: Vec<Config>,
    /// The days a token of the kept configurations left out of `fitting` as slower depths
    /// ([`slower_than`]), when asked for.
    pub(crate) slower: Vec<f64>,
    /// The fastest configuration that fits ([`pace_order`]'s first).
    pub(crate) fastest: Option<Config>,
    /// How many valid configurations were weighed in full (the rest decided by a bound).
    pub(crate) graded: u64,
    /// Every valid configuration, when none fits (the verdict then names the fastest).
    unfit: Option<Config>,
    /// How many valid configurations there are.
    pub(crate) all: u64,
    /// The lightest valid configuration.
    lightest: Option<Lightest>,
    /// The configurations left out, by rule.
    pub(crate) excluded: Vec<Exclusion>,
    /// The tallies of each context-parallel degree and precision.
    pub(crate) tallies: Tallies,
}

/// [`configurations_counted`] as the search needs it: memory first, and the step time only of
/// the configurations that fit (a configuration over the cap can never be part of a plan; its
/// pace is wanted only when none fits, for the verdict's fastest, and then every one is timed).
/// A time model turns a configuration away only for what the search refuses before it starts
/// (a GPU without kernel or FP8 figures), so the count of valid configurations is the same.
///
/// Of the configurations that fit, `fitting` keeps those `keep` accepts and `fastest` names
/// the fastest of all. A step no lighter than a 1F1B step over the cap ([`no_lighter`]: its
/// interleaved siblings, as an interleaved schedule holds at least 1F1B's activations on every
/// stage, the first stage's `p − i + (p − 1)/v ≥ p − i` micro-batches ([`Step::in_flight`]);
/// and every larger micro-batch of it) is decided over the cap unweighed ([`OverCap`]): counted,
/// and never the lightest, since that 1F1B step is no heavier and comes first in the step order
/// (the micro-batch, then the schedule, then the batch), so it was weighed before. A 1F1B
/// step's own interleaved steps are decided with it, all at once ([`decide_depths`]), and
/// passed over where they come.
///
/// With `depths_by_pace` (a search whose choices count every depth of a step as one, or that
/// lists one plan, ranked by anything but memory), a kept
/// interleaved configuration slower than another depth of its layout and step
/// ([`slower_than`]) leaves `fitting` for `slower`, its days a token alone.
///
/// It works in `scratch` (a thread's [`SCRATCH`]): nothing in it outlives the shape, each part
/// emptied or worked out again before it is read. Once `progress` is
/// [`stopping`](crate::search::progress::stopping), it stops at the next layout: what it gives
/// then is incomplete, for the search to discard.
#[allow(clippy::too_many_arguments)]
pub(crate) fn weighed_configurations(
    brief: &Brief,
    shape: &Shape,
    space: &MemorySpace,
    time: &TimeModel,
    keep: &dyn Fn(&Config) -> bool,
    depths_by_pace: bool,
    buffers: Buffers,
    scratch: &mut Scratch,
    progress: &dyn Progress,
) -> Weighed {
    let Buffers {
        configs: mut fitting,
        mut slower,
    } = buffers;
    let Scratch {
        shared,
        steps,
        refused,
        extra,
        models: detailed,
        kept,
        over,
        cache,
    } = scratch;
    // Micro-batches are kept by degrees and step, not by shape.
    cache.clear();
    let machine = brief.machine();
    let mut excluded = Exclusions::default();
    fitting.clear();
    let mut fastest: Option<Config> = None;
    let mut fit = 0u64;
    let mut lightest_one: Option<Lightest> = None;
    let mut tallies = Tallies::default();
    let mut all = 0u64;
    let mut graded = 0u64;
    // Failures cost the same share of any run of a shape on the machine.
    let goodput = machine
        .reliability
        .outage(
            shape.params() + shape.mtp_params(),
            machine.cluster.gpus,
            1.0,
        )
        .ok()
        .map(|o| o.goodput);
    let plate_models = match space {
        MemorySpace::Plate => space.models(),
        MemorySpace::Detailed { .. } => Vec::new(),
    };
    // Whether the stack overlaps TP communication (a step may then ask for it).
    let overlappable = match space {
        MemorySpace::Detailed { options, .. } => options.stack.overlaps_tp(),
        MemorySpace::Plate => false,
    };
    // The degrees (TP, CP, PP, DP, EP, ETP) whose steps, stage kinds and shares the buffers hold.
    let mut steps_of = None;
    let mut kinds = None;
    // The days a token of the kept slower depths.
    slower.clear();
    for layout in until_stopped(space.layouts(brief, shape), progress) {
        over.clear();
        kept.clear();
        // The layout's steps and its stage kinds (`None`: the split refuses the layout, and
        // each step is graded the whole way for its error) depend on its degrees alone, not
        // on its ZeRO stage or replicas: worked out once for the layouts that share them,
        // which come one after another ([`layouts_with`]'s order). The expert degrees are
        // among them: the slots' shares (stage memory, unsharded time) split the experts.
        if let MemorySpace::Detailed { options, .. } = space {
            let degrees = (
                layout.tp, layout.cp, layout.pp, layout.dp, layout.ep, layout.etp,
            );
            if steps_of != Some(degrees) {
                space.steps_into(shape, &layout, steps, refused, extra);
                detailed.clear();
                detailed.extend(steps.iter().map(|&step| {
                    MemoryModel::Detailed(Detailed {
                        step,
                        options: *options,
                    })
                }));
                kinds = stage_kinds(shape, &layout, options.stages).ok();
                shared.assign(steps, overlappable);
                steps_of = Some(degrees);
            }
            shared.empty();
        }
        let models = match space {
            MemorySpace::Detailed { .. } => &*detailed,
            MemorySpace::Plate => &plate_models,
        };
        // What the step before gave, when that was no error.
        let mut last: Option<Option<f64>> = None;
        for (place, model) in models.iter().enumerate() {
            let weighed = match model {
                MemoryModel::Detailed(d) => {
                    // An interleaved step whose 1F1B step was found over the cap was counted
                    // with it ([`decide_depths`]).
                    if d.step.schedule != Schedule::OneFOneB && shared.slot(place).over {
                        last = Some(None);
                        continue;
                    }
                    // A step overlapping TP communication right after the same step without the
                    // overlap (the overlap is last in a step's order) needs its memory and TE's
                    // userbuffers, added last as `Memory::total` adds them ([`Shared::assign`]).
                    // Over the cap, it is decided unweighed: no lighter than the sibling, which
                    // comes first in the step order and so stays the lightest on a tie.
                    let sibling = last.filter(|_| shared.overlaps_the_step_before[place]);
                    let decided = match sibling {
                        Some(weighed) => Some(Ok(weighed
                            .map(|b| {
                                b + userbuffers(d.options.stack, &d.step, shape.hidden, &layout)
                            })
                            .filter(|&b| memory_fits(brief, b)))),
                        None => kinds
                            .as_ref()
                            .and_then(|k| over.decide(d, shared.slot_of[place], &layout, k)),
                    };
                    let weighed = match decided {
                        Some(decided) => decided,
                        None => {
                            let (slot, share) = shared.slot_and_share(place);
                            let stages = slot.stages(share, d, shape, &layout, kinds.as_ref());
                            let bytes = d.schedule_allowed().and_then(|()| match stages {
                                Some(stages) => d.peak_bytes(stages, &layout).map(Some),
                                None => d.memory(shape, &layout).map(|m| Some(m.total())),
                            });
                            if let (Ok(Some(b)), Schedule::OneFOneB) = (&bytes, d.step.schedule) {
                                if !memory_fits(brief, *b) {
                                    over.push(d.step);
                                }
                            }
                            bytes
                        }
                    };
                    last = weighed.as_ref().ok().copied();
                    let over_cap = last.is_some_and(|b| b.is_none_or(|b| !memory_fits(brief, b)));
                    if over_cap && d.step.schedule == Schedule::OneFOneB {
                        let depths = shared.depths[shared.slot_of[place] as usize];
                        if let (true, Some(k)) = (depths.count > 0, kinds.as_ref()) {
                            if decide_depths(d, &depths, &layout, k) {
                                shared.slot(place).over = true;
                                all += depths.count;
                                tallies.count_heavier(&layout, model, depths.count);
                            }
                        }
                    }
                    weighed
                }
                MemoryModel::Plate => model
                    .memory(brief.seq_len, shape, &layout)
                    .map(|m| Some(m.total())),
            };
            let bytes = match weighed {
                Ok(Some(bytes)) => bytes,
                Ok(None) => {
                    // Decided over the cap by a 1F1B step's peak ([`OverCap`]).
                    all += 1;
                    tallies.count_heavier(&layout, model, 1);
                    continue;
                }
                Err(e) => {
                    excluded.add(&e);
                    continue;
                }
            };
            graded += 1;
            // Only a configuration that fits is timed; one the time model refuses is left out.
            let config = if memory_fits(brief, bytes) {
                let days_per_token = match model {
                    MemoryModel::Detailed(d) => slot_pace(
                        shared.slot_and_share(place),
                        time,
                        &machine,
                        shape,
                        &layout,
                        d,
                        kinds.as_ref(),
                        goodput,
                        cache,
                    ),
                    MemoryModel::Plate => time
                        .run_time_cached(&machine, shape, &layout, model, 1, Some(cache))
                        .map(|r| r.map(|r| r.days_per_token)),
                };
                match days_per_token {
                    Ok(k) => Some(Config {
                        layout,
                        model: *model,
                        bytes,
                        pace: Pace::from_days_per_token(k),
                        prefer: 0.0,
                    }),
                    Err(e) => {
                        excluded.add(&e);
                        continue;
                    }
                }
            } else {
                None
            };
            all += 1;
            lighten(&mut lightest_one, bytes, &layout, model.step());
            tallies.count(&layout, model, bytes, config.as_ref());
            if let Some(c) = &config {
                fit += 1;
                quicken(&mut fastest, c);
                if keep(c) {
                    if depths_by_pace {
                        // Kept aside until the layout's fastest depths are known.
                        if is_depth(model) {
                            let slot = shared.slot(place);
                            slot.fastest_depth = slot.fastest_depth.min(c.pace.key());
                        }
                        kept.push(Kept {
                            place: place as u32,
                            bytes,
                            pace: c.pace,
                        });
                    } else {
                        fitting.push(*c);
                    }
                }
            }
        }
        // The layout's kept configurations in their order, but each interleaved one slower
        // than the fastest depth of its step: its days a token only, for the passing count.
        for k in kept.iter() {
            let place = k.place as usize;
            let depth = is_depth(&models[place]);
            if depth && slower_than(k.pace.key(), shared.slot(place).fastest_depth) {
                slower.push(k.pace.key());
            } else {
                fitting.push(Config {
                    layout,
                    model: models[place],
                    bytes: k.bytes,
                    pace: k.pace,
                    prefer: 0.0,
                });
            }
        }
        // The steps the batch rule turned away, after the others (as `steps_for` lists them),
        // each rule's message written once.
        for s in refused.iter() {
            excluded.add_lazily(BatchTarget::RULE, || space.refusal(shape, s, &layout));
        }
    }
    if fit == 0 && all > 0 {
        // Nothing fits: the verdict names the fastest of all, so every one is timed.
        let (mut unfit, mut all, mut lightest) = (None::<Config>, 0u64, None);
        let excluded = for_each_configuration(
            brief,
            shape,
            space,
            time,
            |c| {
                all += 1;
                lighten(&mut lightest, c.bytes, &c.layout, c.model.step());
                quicken(&mut unfit, &c);
            },
            progress,
        );
        return Weighed {
            fitting,
            slower,
            fastest: None,
            all,
            graded: all,
            lightest,
            unfit,
            excluded,
            tallies,
        };
    }
    Weighed {
        fitting,
        slower,
        fastest,
        unfit: None,
        all,
        graded,
        lightest: lightest_one,
        excluded: excluded.into_vec(),
        tallies,
    }
}

/// The verdict on `shape` from its configurations (`fitting` those that fit in memory, fastest
/// first, `excluded` the tallies of those the rules left out): the lightest for memory, the
/// fastest that fits for the token window, and, when the rules leave no configuration at all,
/// the rule that broke.
pub(crate) fn shape_verdict(
    brief: &Brief,
    shape: &Shape,
    weighed: &Weighed,
    fastest: Option<&Config>,
    options: &SearchOptions,
) -> ShapeVerdict {
    let excluded = &weighed.excluded;
    let fastest = fastest.or(weighed.unfit.as_ref());
    let pace = fastest.map_or(Pace::Plate, |c| c.pace);
    verdict_because(brief, shape, weighed.lightest, pace, || {
        match excluded.first() {
            // The rule that left the configurations out, as the space offered them (the batch
            // resolved layout by layout), not as the raw steps read.
            Some(e) => format!(
                "layout: no layout and training step go together, for example: {}",
                e.example
            ),
            None => no_configuration(brief, shape, options),
        }
    })
}

/// Why a shape has no configuration at all: the rule its first layout and step break.
fn no_configuration(brief: &Brief, shape: &Shape, options: &SearchOptions) -> String {
    let first_error = iproduct!(
        options.memory.layouts(brief, shape),
        options.memory.models()
    )
    .find_map(|(layout, model)| {
        let memory = model.memory(brief.seq_len, shape, &layout).err();
        memory.or_else(|| {
            options
                .time
                .run_time(&brief.machine(), shape, &layout, &model, 1)
                .err()
        })
    });
    match first_error {
        Some(e) => format!("layout: no layout and training step go together, for example: {e}"),
        None => format!(
            "layout: no TP × PP divides the {} GPUs within the layout rules",
            brief.gpus
        ),
    }
}

/// A shape's configurations that fit in memory, in both orders, and how many there are in all.
pub(crate) struct Fitting {
    /// The configurations, as weighed.
    pub(crate) configs: Vec<Config>,
    /// Their places in [`pace_order`], fastest first ([`Fitting::by_pace`]).
    pub(crate) order: Vec<u32>,
    pub(crate) by_memory: Vec<Config>,
    /// The days a token of the kept configurations left out of `configs` as slower than
    /// another depth of their layout and step ([`slower_than`]), fewest first: they count
    /// among the passing plans and can be nothing else.
    pub(crate) slower: Vec<f64>,
    pub(crate) all: u64,
    /// Of `all`, how many were weighed in full (the rest decided by a bound).
    pub(crate) graded: u64,
    /// Where the brief counts the critical batch, each global batch's configurations, which
    /// share their loss, as a fitting of their own ([`Fitting::split_by_batch`]), in the order
    /// of their fastest; empty otherwise.
    pub(crate) by_batch: Vec<Fitting>,
}

impl Fitting {
    /// The configurations fastest first ([`pace_order`]).
    pub(crate) fn by_pace(&self) -> impl ExactSizeIterator<Item = &Config> + '_ {
        self.order.iter().map(|&i| &self.configs[i as usize])
    }

    /// Each global batch's configurations ([`Config::global_batch`]) as a fitting of their
    /// own, in the order of each batch's fastest; none counted among `all` or `graded`, and
    /// no slower depths (a search that counts the critical batch keeps every depth whole).
    pub(crate) fn split_by_batch(&self) -> Vec<Fitting> {
        let mut batches: Vec<Option<u64>> = Vec::new();
        for c in self.by_pace() {
            if !batches.contains(&c.global_batch()) {
                batches.push(c.global_batch());
            }
        }
        batches
            .into_iter()
            .map(|batch| {
                let of_batch = |c: &&Config| c.global_batch() == batch;
                let configs: Vec<Config> = self.configs.iter().filter(of_batch).copied().collect();
                Fitting {
                    order: order::pace_order_of(&configs),
                    by_memory: self.by_memory.iter().filter(of_batch).copied().collect(),
                    configs,
                    slower: Vec::new(),
                    all: 0,
                    graded: 0,
                    by_batch: Vec::new(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::step::detailed::Options;
    use crate::cost::step::precision::Precision;
    use crate::cost::step::stack::Stack;
    use crate::cost::step_time::options::TimeOptions;
    use crate::model::layout::ExpertSpace;
    use crate::plan::verdict::lightest;
    use crate::search::space::configurations;
    use crate::search::space::configurations_counted;
    use crate::search::space::ParallelSpace;
    use crate::search::weigh::order::pace_order;
    use crate::search::weigh::order::pace_order_of;

    /// The detailed space of the default brief with CP 1 and 2 and both precisions.
    fn cp_and_fp8(brief: &Brief) -> (MemorySpace, TimeModel) {
        let options = Options::for_stack(Stack::MegatronTe);
        let space = MemorySpace::detailed_defaults(brief, options).with_parallel(
            &[Precision::Bf16, Precision::Fp8],
            ParallelSpace {
                cps: vec![1, 2],
                replicates: vec![1, 2],
                experts: ExpertSpace::default(),
            },
        );
        (
            space,
            TimeModel::Detailed(TimeOptions::for_stack(Stack::MegatronTe)),
        )
    }

    #[test]
    fn a_slower_depth_takes_more_days_at_every_token_count() {
        // The least pace `slower_than` calls slower, found bit by bit, against token counts
        // from one to the largest a double holds exactly and beyond.
        for fastest in [1.0e-12, 3.7e-10, 1.0 / 3.0, 8.9e-9, 1.0] {
            let mut k = fastest;
            while !slower_than(k, fastest) {
                k = f64::from_bits(k.to_bits() + 1);
            }
            assert!(k.to_bits() - fastest.to_bits() <= 64, "{fastest}");
            for t in [
                1u64,
                3,
                1_000_000_007,
                15_000_000_000_000,
                (1 << 53) - 1,
                u64::MAX,
            ] {
                let t = t as f64;
                assert!(t * k > t * fastest, "{fastest} at {t}");
            }
        }
        assert!(!slower_than(1.0, 1.0));
        assert!(!slower_than(2.0, 0.0), "only slower than a positive pace");
    }

    #[test]
    fn sorting_by_integer_keys_gives_the_pace_order() {
        // Every configuration of 70B, then the same with paces and memory made to tie in
        // threes (the runs the whole order breaks), and with a negative zero and infinities.
        let brief = Brief::default();
        let (space, time) = cp_and_fp8(&brief);
        let shape = crate::model::preset("70b").unwrap();
        let all = configurations(&brief, &shape, &space, &time);
        let mut tied = all.clone();
        for (i, c) in tied.iter_mut().enumerate() {
            c.pace = Pace::from_days_per_token(Some([1e-9, 0.0, -0.0, f64::INFINITY][i % 12 / 3]));
            c.bytes = [7e10, 8e10][i % 2];
        }
        for mut configs in [all, tied] {
            let mut expected = configs.clone();
            expected.sort_by(pace_order);
            configs.reverse();
            let sorted: Vec<Config> = pace_order_of(&configs)
                .iter()
                .map(|&i| configs[i as usize])
                .collect();
            assert_eq!(sorted, expected);
        }
    }

    /// [`weighed_configurations`] keeping every configuration that fits, each depth in full.
    fn weigh_every_one(
        brief: &Brief,
        shape: &Shape,
        space: &MemorySpace,
        time: &TimeModel,
    ) -> Weighed {
        weighed_configurations(
            brief,
            shape,
            space,
            time,
            &|_| true,
            false,
            Buffers::default(),
            &mut Scratch::default(),
            &crate::search::progress::Silent,
        )
    }

    #[test]
    fn what_the_search_weighs_is_what_grading_every_configuration_gives() {
        // Memory first, the step time only where it fits, each micro-batch's compute and the
        // parts a step's schedules share worked out once: the same configurations, bit for bit.
        let brief = Brief::default();
        let (space, time) = cp_and_fp8(&brief);
        for name in ["70b", "405b"] {
            let shape = crate::model::preset(name).unwrap();
            let (all, excluded) = configurations_counted(&brief, &shape, &space, &time);
            let weighed = weigh_every_one(&brief, &shape, &space, &time);
            let fits: Vec<Config> = all
                .iter()
                .filter(|c| memory_fits(&brief, c.bytes))
                .copied()
                .collect();
            assert!(fits.len() > 1000, "{name}: {}", fits.len());
            assert_eq!(weighed.fitting, fits, "{name}");
            assert_eq!(weighed.all, all.len() as u64);
            assert_eq!(weighed.excluded, excluded);
            let lightest_of_all =
                lightest(all.iter().map(|c| (c.bytes, &c.layout, c.model.step())));
            assert_eq!(weighed.lightest, lightest_of_all);
            // Each CP degree's and precision's count, lightest and fastest too, though the
            // bounds leave configurations over the cap unweighed.
            let mut tallies = Tallies::default();
            for c in &all {
                let fits = memory_fits(&brief, c.bytes).then_some(c);
                tallies.count(&c.layout, &c.model, c.bytes, fits);
            }
            assert_eq!(
                weighed.tallies.facets(&brief, &shape),
                tallies.facets(&brief, &shape),
                "{name}"
            );
            assert!(
                weighed.graded < weighed.all,
                "{name}: the bounds decide some"
            );
        }
    }

    #[test]
    fn each_cp_degree_and_precision_gets_its_own_verdict() {
        let brief = Brief::default();
        let (space, time) = cp_and_fp8(&brief);
        let shape = crate::model::preset("70b").unwrap();
        let weighed = weigh_every_one(&brief, &shape, &space, &time);
        let facets = weighed.tallies.facets(&brief, &shape);
        let named: Vec<(&str, &str)> = facets
            .iter()
            .map(|f| (f.dimension.as_str(), f.value.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("cp", "1"),
                ("cp", "2"),
                ("precision", "bf16"),
                ("precision", "fp8")
            ]
        );
        // Each dimension's facets share out the configurations and the fitting ones.
        for dimension in ["cp", "precision"] {
            let of = facets.iter().filter(|f| f.dimension == dimension);
            assert_eq!(
                of.clone().map(|f| f.configurations).sum::<u64>(),
                weighed.all
            );
            let fitting = of.map(|f| f.fitting).sum::<u64>();
            assert_eq!(fitting, weighed.fitting.len() as u64);
        }
        // A facet's fastest is the fastest fitting configuration with that value: the
        // shape's fastest overall is the fastest of one CP degree and one precision.
        let fastest = weighed
            .fitting
            .iter()
            .min_by(|a, b| pace_order(a, b))
            .unwrap();
        let k = fastest.pace.days_per_token();
        let cp = facets
            .iter()
            .find(|f| f.dimension == "cp" && f.value == fastest.layout.cp.to_string())
            .unwrap();
        assert_eq!(cp.days_per_token, k);
        assert_eq!(cp.fastest_layout, Some(fastest.layout));
        // FP8's fastest is faster than BF16's, and so trains more tokens in the month.
        let [bf16, fp8] = ["bf16", "fp8"].map(|p| {
            facets
                .iter()
                .find(|f| f.dimension == "precision" && f.value == p)
                .unwrap()
        });
        assert!(fp8.days_per_token.unwrap() < bf16.days_per_token.unwrap());
        assert!(fp8.max_tokens_in_time > bf16.max_tokens_in_time);
        assert_eq!(fp8.fastest_step.unwrap().precision, Precision::Fp8);
    }

    #[test]
    fn at_131072_tokens_on_16384_gpus_cp_1_fails_on_days_and_longer_cp_passes() {
        // The batch target (16 Mi tokens) holds 128 sequences of 131,072, so at CP 1 the
        // 16,384 GPUs need TP × PP = 128: a pipeline of 16 stages with one micro-batch a step,
        // nearly all bubble. Splitting the sequence lets DP stay at 128 with a shorter pipeline.
        let brief = Brief {
            gpus: 16_384,
            seq_len: 131_072,
            max_days: 90.0,
            ..Brief::default()
        };
        let options = Options::for_stack(Stack::MegatronTe);
        let space = MemorySpace::detailed_defaults(&brief, options);
        let time = TimeModel::Detailed(TimeOptions::for_stack(Stack::MegatronTe));
        let shape = crate::model::preset("405b").unwrap();
        let facets = weigh_every_one(&brief, &shape, &space, &time)
            .tallies
            .facets(&brief, &shape);
        let cp = |v: &str| facets.iter().find(|f| f.dimension == "cp" && f.value == v);
        let one = cp("1").unwrap();
        assert!(one.token_window.is_none());
        assert!(
            one.reason.as_deref().unwrap().starts_with("days:"),
            "{one:?}"
        );
        let layout = one.fastest_layout.unwrap();
        assert_eq!((layout.tp, layout.pp, layout.dp), (8, 16, 128));
        for passing in ["16", "32"] {
            assert!(cp(passing).unwrap().token_window.is_some(), "CP {passing}");
        }
    }
}
