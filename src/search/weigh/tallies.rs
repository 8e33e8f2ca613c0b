//! Each CP degree's and precision's verdict ([`Tallies`]): how many configurations were
//! weighed, fitted or left out, and by which rule, with an example of each.

use crate::brief::Brief;
use crate::cost::memory::MemoryModel;
use crate::cost::step::precision::Precision;
use crate::model::layout::Layout;
use crate::model::Shape;
use crate::plan::verdict::{facet, Facet, Lightest};
use crate::search::space::Config;
use crate::search::weigh::order::lighten;
use crate::search::weigh::order::quicken;

/// One context-parallel degree's or precision's share of a shape's configurations.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    configurations: u64,
    fitting: u64,
    lightest: Option<Lightest>,
    /// The fastest that fits (the first in `pace_order`).
    fastest: Option<Config>,
}

/// The tallies of each context-parallel degree and each precision, in the order first met.
#[derive(Debug, Default)]
pub(crate) struct Tallies {
    cp: Vec<(u64, Tally)>,
    precision: Vec<(Precision, Tally)>,
}

impl Tallies {
    /// Counts a valid configuration of `bytes`; `fits` when it fits (with its pace).
    #[inline]
    pub(crate) fn count(
        &mut self,
        layout: &Layout,
        model: &MemoryModel,
        bytes: f64,
        fits: Option<&Config>,
    ) {
        let step = model.step();
        for tally in self.of(layout, model) {
            tally.configurations += 1;
            lighten(&mut tally.lightest, bytes, layout, step);
            if let Some(c) = fits {
                tally.fitting += 1;
                quicken(&mut tally.fastest, c);
            }
        }
    }

    /// Counts a valid configuration that does not fit and is no lighter than one counted
    /// before it with the same CP degree and precision (its lightest stands).
    /// `n` such configurations of the same precision.
    #[inline]
    pub(crate) fn count_heavier(&mut self, layout: &Layout, model: &MemoryModel, n: u64) {
        for tally in self.of(layout, model) {
            tally.configurations += n;
        }
    }

    /// The tallies of `layout`'s CP degree and `model`'s precision.
    #[inline]
    fn of(&mut self, layout: &Layout, model: &MemoryModel) -> [&mut Tally; 2] {
        let precision = model.step().map_or(Precision::Bf16, |s| s.precision);
        fn of<K: PartialEq>(tallies: &mut Vec<(K, Tally)>, key: K) -> &mut Tally {
            let i = match tallies.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    tallies.push((key, Tally::default()));
                    tallies.len() - 1
                }
            };
            &mut tallies[i].1
        }
        [
            of(&mut self.cp, layout.cp),
            of(&mut self.precision, precision),
        ]
    }

    /// Each facet's verdict, for a dimension searched at more than one value.
    pub(crate) fn facets(&self, brief: &Brief, shape: &Shape) -> Vec<Facet> {
        let one = |dimension: &str, value: String, t: &Tally| {
            facet(
                brief,
                shape,
                dimension,
                value,
                t.configurations,
                t.fitting,
                t.lightest,
                t.fastest
                    .map(|c| (c.layout, c.model.step().copied(), c.pace)),
            )
        };
        let mut facets = Vec::new();
        if self.cp.len() > 1 {
            let mut cps = self.cp.clone();
            cps.sort_by_key(|(c, _)| *c);
            facets.extend(cps.iter().map(|(c, t)| one("cp", c.to_string(), t)));
        }
        if self.precision.len() > 1 {
            let mut precisions = self.precision.clone();
            precisions.sort_by_key(|(p, _)| *p);
            facets.extend(
                precisions
                    .iter()
                    .map(|(p, t)| one("precision", p.to_string(), t)),
            );
        }
        facets
    }
}
