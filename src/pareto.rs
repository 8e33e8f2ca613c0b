//! The Pareto front of passing plans on (loss, days), both to be minimised.
//!
//! A plan is on the front when no other passing plan is at least as good on both objectives and
//! better on one. Plans equal on both keep one representative: the least memory per GPU, then
//! the smaller TP, PP, ZeRO ([`crate::rank::tie_break`]). The front is kept incrementally, so
//! memory grows with the front, not with the number of passing plans, and the result does not
//! depend on the order plans arrive in.

use std::cmp::Ordering;

use crate::rank::{tie_break, Candidate};

/// A Pareto front under construction. Invariant: sorted by days strictly rising, loss strictly
/// falling.
#[derive(Debug, Clone, Default)]
pub struct Front {
    points: Vec<Candidate>,
}

impl Front {
    /// An empty front.
    pub fn new() -> Self {
        Front::default()
    }

    /// Offers one candidate: kept if nothing on the front dominates it, and whatever it
    /// dominates is dropped.
    pub fn insert(&mut self, c: Candidate) {
        // Points with days ≤ c.days form a prefix; its last has the lowest loss among them.
        let at_or_before = self.points.partition_point(|q| q.days <= c.days);
        if let Some(q) = at_or_before.checked_sub(1).map(|i| self.points[i]) {
            match q.loss.total_cmp(&c.loss) {
                Ordering::Less => return,
                Ordering::Equal if q.days < c.days => return,
                Ordering::Equal => {
                    // The same point on both objectives: keep the better representative.
                    if tie_break(&c, &q) == Ordering::Less {
                        self.points[at_or_before - 1] = c;
                    }
                    return;
                }
                Ordering::Greater => {}
            }
        }
        // c is not dominated. Points with days ≥ c.days and loss ≥ c.loss are dominated by it;
        // they are a run starting at the first point with days ≥ c.days.
        let start = self.points.partition_point(|q| q.days < c.days);
        let end = start
            + self.points[start..]
                .iter()
                .take_while(|q| q.loss >= c.loss)
                .count();
        self.points.splice(start..end, [c]);
    }

    /// Both fronts as one.
    pub fn merge(mut self, other: Front) -> Front {
        for c in other.points {
            self.insert(c);
        }
        self
    }

    /// The front, sorted by days.
    pub fn into_points(self) -> Vec<Candidate> {
        self.points
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::layout::layouts;
    use crate::model::preset;

    fn point(tokens: u64, loss: f64, days: f64, memory: f64) -> Candidate {
        let layout = layouts(&Brief::default(), &preset("70b").unwrap())[0];
        Candidate {
            shape: 0,
            tokens,
            layout,
            model: crate::memory::MemoryModel::Plate,
            loss,
            days,
            memory,
        }
    }

    fn front_of(points: &[Candidate]) -> Vec<(f64, f64)> {
        let mut f = Front::new();
        points.iter().for_each(|p| f.insert(*p));
        f.into_points().iter().map(|p| (p.days, p.loss)).collect()
    }

    #[test]
    fn dominated_points_are_dropped_and_the_rest_sorted_by_days() {
        let pts = [
            point(1, 2.0, 10.0, 1.0),
            point(2, 1.9, 20.0, 1.0),
            point(3, 1.95, 25.0, 1.0), // dominated by (20, 1.9)
            point(4, 1.8, 30.0, 1.0),
            point(5, 2.0, 12.0, 1.0), // dominated by (10, 2.0): same loss, more days
        ];
        assert_eq!(front_of(&pts), [(10.0, 2.0), (20.0, 1.9), (30.0, 1.8)]);
    }

    #[test]
    fn a_new_point_can_remove_several() {
        let pts = [
            point(1, 2.0, 10.0, 1.0),
            point(2, 1.9, 20.0, 1.0),
            point(3, 1.5, 5.0, 1.0),
        ];
        assert_eq!(front_of(&pts), [(5.0, 1.5)]);
    }

    #[test]
    fn equal_points_keep_the_one_with_less_memory() {
        let mut f = Front::new();
        f.insert(point(1, 1.9, 20.0, 5.0));
        f.insert(point(2, 1.9, 20.0, 3.0));
        f.insert(point(3, 1.9, 20.0, 4.0));
        let pts = f.into_points();
        assert_eq!(pts.len(), 1);
        assert_eq!(pts[0].tokens, 2);
    }

    #[test]
    fn the_front_does_not_depend_on_arrival_order() {
        let pts: Vec<Candidate> = (0..60u64)
            .map(|i| {
                point(
                    i,
                    2.0 - ((i * 7) % 11) as f64 * 0.01,
                    ((i * 13) % 17) as f64,
                    (i % 3) as f64,
                )
            })
            .collect();
        let forward = front_of(&pts);
        let mut rev = pts.clone();
        rev.reverse();
        assert_eq!(front_of(&rev), forward);
        let (a, b) = pts.split_at(25);
        let mut fa = Front::new();
        a.iter().for_each(|p| fa.insert(*p));
        let mut fb = Front::new();
        b.iter().for_each(|p| fb.insert(*p));
        let merged: Vec<_> = fb
            .merge(fa)
            .into_points()
            .iter()
            .map(|p| (p.days, p.loss))
            .collect();
        assert_eq!(merged, forward);
    }
}
