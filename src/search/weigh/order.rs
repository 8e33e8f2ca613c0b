//! The orders a shape's configurations are kept in: by pace ([`pace_order`], integer-keyed),
//! by memory ([`memory_order`]), and the lightest and quickest of a kind ([`lighten`],
//! [`quicken`]).

use crate::cost::step::Step;
use crate::model::layout::Layout;
use crate::plan::pace::Pace;
use crate::plan::verdict::{layout_order, Lightest};
use crate::search::space::Config;
/// The order plans of one token count come in under every ranking but memory: fewer days,
/// then the tie-break (runnable first, less memory, smaller TP, PP, ZeRO, smaller step).
#[inline]
pub(crate) fn pace_order(a: &Config, b: &Config) -> std::cmp::Ordering {
    a.pace
        .key()
        .total_cmp(&b.pace.key())
        .then(a.prefer.total_cmp(&b.prefer))
        .then(a.bytes.total_cmp(&b.bytes))
        .then_with(|| layout_order(&a.layout, &b.layout))
        .then_with(|| a.model.step().cmp(&b.model.step()))
}

/// The places of `configs` in [`pace_order`], found without moving them: the sort moves
/// small integer keys (each f64 in `f64::total_cmp`'s order: pace, the runnable key, memory),
/// with the whole order on ties. Under the detailed time model, paces rarely tie: the keys
/// are the pace and the place alone, in one integer, with the whole order on a tie of pace.
pub(crate) fn pace_order_of(configs: &[Config]) -> Vec<u32> {
    fn ordered(x: f64) -> u64 {
        let bits = x.to_bits() as i64;
        ((bits ^ ((((bits >> 63) as u64) >> 1) as i64)) as u64) ^ (1 << 63)
    }
    if configs.iter().all(|c| matches!(c.pace, Pace::PerToken(_))) {
        let mut keys: Vec<u128> = configs
            .iter()
            .enumerate()
            .map(|(i, c)| (u128::from(ordered(c.pace.key())) << 32) | i as u128)
            .collect();
        keys.sort_unstable();
        order_ties(&mut keys, configs, |a, b| a >> 32 == b >> 32, |&k| k as u32);
        return keys.iter().map(|&k| k as u32).collect();
    }
    let mut keys: Vec<(u64, u64, u64, u32)> = configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (pace, prefer, bytes) =
                (ordered(c.pace.key()), ordered(c.prefer), ordered(c.bytes));
            (pace, prefer, bytes, i as u32)
        })
        .collect();
    keys.sort_unstable();
    // Keys equal but for the place (rare: the same pace and memory).
    order_ties(
        &mut keys,
        configs,
        |a, b| (a.0, a.1, a.2) == (b.0, b.1, b.2),
        |k| k.3,
    );
    keys.iter().map(|k| k.3).collect()
}

/// Puts each run of sorted `keys` that `same` holds equal into [`pace_order`] (`place`: the
/// key's configuration's place in `configs`).
fn order_ties<K>(
    keys: &mut [K],
    configs: &[Config],
    same: impl Fn(&K, &K) -> bool,
    place: impl Fn(&K) -> u32,
) {
    let mut start = 0;
    while start < keys.len() {
        let run = keys[start..]
            .iter()
            .take_while(|k| same(k, &keys[start]))
            .count();
        if run > 1 {
            keys[start..start + run].sort_unstable_by(|a, b| {
                pace_order(&configs[place(a) as usize], &configs[place(b) as usize])
            });
        }
        start += run;
    }
}

/// The order under the memory ranking: less memory, then fewer days, then the rest.
pub(crate) fn memory_order(a: &Config, b: &Config) -> std::cmp::Ordering {
    a.bytes
        .total_cmp(&b.bytes)
        .then(a.pace.key().total_cmp(&b.pace.key()))
        .then(a.prefer.total_cmp(&b.prefer))
        .then_with(|| layout_order(&a.layout, &b.layout))
        .then_with(|| a.model.step().cmp(&b.model.step()))
}

/// Makes `current` the configuration (`bytes`, `layout`, `step`) if that is lighter
/// ([`lightest`]'s order; the first on a tie), in place.
#[inline]
pub(crate) fn lighten(
    current: &mut Option<Lightest>,
    bytes: f64,
    layout: &Layout,
    step: Option<&Step>,
) {
    let lighter = |l: &Lightest| {
        bytes
            .total_cmp(&l.bytes)
            .then_with(|| layout_order(layout, &l.layout))
            .then_with(|| step.cmp(&l.step.as_ref()))
            .is_lt()
    };
    if current.as_ref().is_none_or(lighter) {
        *current = Some(Lightest {
            bytes,
            layout: *layout,
            step: step.copied(),
        });
    }
}

/// Makes `current` the configuration `c` if that comes first in [`pace_order`], in place.
#[inline]
pub(crate) fn quicken(current: &mut Option<Config>, c: &Config) {
    // The pace decides but on a tie (`pace_order`'s first key).
    let first = |f: &Config| match c.pace.key().total_cmp(&f.pace.key()) {
        std::cmp::Ordering::Equal => pace_order(c, f).is_lt(),
        by_pace => by_pace.is_lt(),
    };
    if current.as_ref().is_none_or(first) {
        *current = Some(*c);
    }
}
