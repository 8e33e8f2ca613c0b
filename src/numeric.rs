//! One-dimensional minimisation, for the fits and optima that need it.

/// The value in `[lo, hi]` that minimises `f`, by golden-section search to `tolerance`
/// (Kiefer 1953): `f` must be unimodal on the interval, as a mean absolute error in one
/// throughput parameter is ([`crate::plan::calibrate`]) and a model's lifetime FLOPs in its
/// log-parameters ([`crate::laws::lifetime`]).
pub fn golden_section(lo: f64, hi: f64, tolerance: f64, f: impl Fn(f64) -> f64) -> f64 {
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (lo, hi);
    let mut c = b - ratio * (b - a);
    let mut d = a + ratio * (b - a);
    let (mut fc, mut fd) = (f(c), f(d));
    while b - a > tolerance {
        if fc <= fd {
            b = d;
            d = c;
            fd = fc;
            c = b - ratio * (b - a);
            fc = f(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + ratio * (b - a);
            fd = f(d);
        }
    }
    (a + b) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_section_finds_the_minimum_of_an_absolute_error() {
        let x = golden_section(0.5, 1.0, 1e-6, |x| (x - 0.7312).abs() + 0.1);
        assert!((x - 0.7312).abs() < 1e-5, "{x}");
        // A minimum at the bound is found at the bound.
        let y = golden_section(0.5, 1.0, 1e-6, |x| x);
        assert!((y - 0.5).abs() < 1e-5, "{y}");
    }
}
