//! How fast a GPU runs one tensor-parallel shard of a layer: the fraction of peak FLOP/s it
//! reaches on the FLOPs it really executes, as a function of the shard's width.
//!
//! Smaller per-GPU matrices run less efficiently (calibration README: the same layer reaches
//! 34.7 % MFU at TP 1 and 14.1 % at TP 8 for 8B). The curve is a table of (width, efficiency)
//! points, where width is the hidden size per TP rank, `h / t` — the narrowest dimension of the
//! attention output projection, and proportional to all the shard's matrix widths — and
//! efficiency is hardware FLOPs (forward, recomputed forward and backward, attention included)
//! over time and peak. Between points it is linear in log₂(width); outside them it is held at
//! the nearest point.
//!
//! The default curve is measured: each row of `data/calibration/h200-llama3-tp-shards.json`
//! (Llama 3 layer shards on one H200, full recomputation, s = 8,192, eager PyTorch) gives a
//! point, and points of equal width are averaged. Eager kernels make it a floor: fused kernels
//! (Transformer Engine) run faster. `--efficiency FILE` replaces it with a user's own
//! measurements, JSON `{"points": [{"width": 1024, "efficiency": 0.41}, …]}`.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::preset;

/// One measured point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    /// Hidden size per TP rank, h / t.
    pub width: f64,
    /// Hardware FLOPs per second over peak, in (0, 1].
    pub efficiency: f64,
}

/// An efficiency curve: points sorted by width, at least one. Read back (from a shard's
/// partial file) through [`EfficiencyCurve::new`], so its checks hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "CurveFile")]
pub struct EfficiencyCurve {
    points: Vec<Point>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CurveFile {
    points: Vec<Point>,
}

impl TryFrom<CurveFile> for EfficiencyCurve {
    type Error = Error;
    fn try_from(file: CurveFile) -> Result<Self> {
        EfficiencyCurve::new(file.points)
    }
}

/// One calibration row and the efficiency it implies.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrationRow {
    /// The model whose layer was sharded.
    pub model: String,
    /// TP degree of the shard.
    pub tp: u64,
    /// h / t.
    pub width: f64,
    /// Hardware efficiency measured.
    pub efficiency: f64,
}

const TP_SHARDS: &str = include_str!("../../../data/calibration/h200-llama3-tp-shards.json");

/// The calibration's TP-shard rows as efficiency points: hardware FLOPs of two layers under
/// full recomputation — 4 × (2 · shard parameters · s) for the matrices and 4 × (2·s·h/t) per
/// token and layer for causal attention (forward, recomputed forward, backward twice) — over
/// the measured seconds per sequence and 989 TFLOP/s.
pub fn calibration_rows() -> Vec<CalibrationRow> {
    let json: serde_json::Value =
        serde_json::from_str(TP_SHARDS).expect("the shipped calibration file is JSON");
    let mut rows = Vec::new();
    for test in ["tp_8B", "tp_70B", "tp_405B"] {
        let t = &json["tests"][test];
        let name = t["shape"].as_str().unwrap_or_default().to_ascii_lowercase();
        let Ok(shape) = preset(&name) else { continue };
        let (layers, s) = (
            t["L"].as_f64().unwrap_or(0.0),
            t["seq"].as_f64().unwrap_or(0.0),
        );
        for r in t["rows"].as_array().into_iter().flatten() {
            let (Some(tp), Some(params), Some(sec)) = (
                r["tp"].as_u64(),
                r["params_shard"].as_f64(),
                r["sec_per_seq"].as_f64(),
            ) else {
                continue;
            };
            let width = shape.hidden as f64 / tp as f64;
            let matmul = 4.0 * 2.0 * params * s;
            let attention = 4.0 * 2.0 * s * width * s * layers;
            rows.push(CalibrationRow {
                model: shape.name.clone(),
                tp,
                width,
                efficiency: (matmul + attention) / sec / 989e12,
            });
        }
    }
    rows
}

impl EfficiencyCurve {
    /// A curve through `points`, checked: at least one, widths > 0 and distinct, efficiencies
    /// in (0, 1].
    pub fn new(mut points: Vec<Point>) -> Result<Self> {
        if points.is_empty() {
            return Err(Error::invalid(
                "efficiency.points",
                "[]",
                "at least one point",
            ));
        }
        for p in &points {
            if !(p.width.is_finite() && p.width > 0.0) {
                return Err(Error::invalid(
                    "efficiency.width",
                    crate::format::exact(p.width),
                    "a number > 0",
                ));
            }
            if !(p.efficiency.is_finite() && p.efficiency >= 1e-3 && p.efficiency <= 1.0) {
                return Err(Error::invalid(
                    "efficiency.efficiency",
                    crate::format::exact(p.efficiency),
                    "a fraction from 0.001 to 1",
                ));
            }
        }
        points.sort_by(|a, b| a.width.total_cmp(&b.width));
        if let Some(w) = points.windows(2).find(|w| w[0].width == w[1].width) {
            return Err(Error::invalid(
                "efficiency.width",
                crate::format::exact(w[0].width),
                "each width once",
            ));
        }
        Ok(EfficiencyCurve { points })
    }

    /// The default curve: the calibration's points, averaged per width.
    pub fn calibrated() -> &'static EfficiencyCurve {
        static CURVE: OnceLock<EfficiencyCurve> = OnceLock::new();
        CURVE.get_or_init(|| {
            let rows = calibration_rows();
            let mut widths: Vec<f64> = rows.iter().map(|r| r.width).collect();
            widths.sort_by(f64::total_cmp);
            widths.dedup();
            let points = widths
                .into_iter()
                .map(|width| {
                    let same: Vec<f64> = rows
                        .iter()
                        .filter(|r| r.width == width)
                        .map(|r| r.efficiency)
                        .collect();
                    Point {
                        width,
                        efficiency: same.iter().sum::<f64>() / same.len() as f64,
                    }
                })
                .collect();
            EfficiencyCurve::new(points).expect("the calibration gives valid points")
        })
    }

    /// The points, by width.
    pub fn points(&self) -> &[Point] {
        &self.points
    }

    /// Efficiency at `width`: linear in log₂(width) between points, held outside them.
    pub fn at(&self, width: f64) -> f64 {
        let p = &self.points;
        let first = p[0];
        let last = p[p.len() - 1];
        if width <= first.width {
            return first.efficiency;
        }
        if width >= last.width {
            return last.efficiency;
        }
        let i = p.partition_point(|q| q.width <= width);
        let (a, b) = (p[i - 1], p[i]);
        let x = (width.log2() - a.width.log2()) / (b.width.log2() - a.width.log2());
        a.efficiency + x * (b.efficiency - a.efficiency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calibration_gives_eleven_rows_and_five_widths() {
        assert_eq!(calibration_rows().len(), 11);
        let widths: Vec<f64> = EfficiencyCurve::calibrated()
            .points()
            .iter()
            .map(|p| p.width)
            .collect();
        assert_eq!(widths, [512.0, 1024.0, 2048.0, 4096.0, 8192.0]);
    }

    #[test]
    fn the_70b_tp_1_row_worked_by_hand() {
        // 2 layers, 1,711,308,800 parameters, 0.2035985 s per sequence of 8,192:
        // (8 × 1,711,308,800 × 8192 + 8 × 8192 × 8192 × 8192 × 2) / 0.2035985 / 989e12 = 0.6010.
        let row = calibration_rows()
            .into_iter()
            .find(|r| r.model == "llama3-70b" && r.tp == 1)
            .unwrap();
        assert!((row.efficiency - 0.6010).abs() < 5e-4, "{}", row.efficiency);
    }

    #[test]
    fn the_curve_rises_with_width_and_fits_each_row_within_ten_percent() {
        let curve = EfficiencyCurve::calibrated();
        assert!(curve
            .points()
            .windows(2)
            .all(|w| w[0].efficiency < w[1].efficiency));
        for r in calibration_rows() {
            let err = (curve.at(r.width) - r.efficiency) / r.efficiency;
            assert!(err.abs() < 0.10, "{} TP {}: {err:+.3}", r.model, r.tp);
        }
    }

    #[test]
    fn interpolation_is_linear_in_log_width_and_held_outside() {
        let c = EfficiencyCurve::new(vec![
            Point {
                width: 1024.0,
                efficiency: 0.4,
            },
            Point {
                width: 4096.0,
                efficiency: 0.6,
            },
        ])
        .unwrap();
        assert!((c.at(2048.0) - 0.5).abs() < 1e-12);
        assert_eq!(c.at(100.0), 0.4);
        assert_eq!(c.at(1e6), 0.6);
    }

    #[test]
    fn bad_points_are_refused() {
        assert!(EfficiencyCurve::new(vec![]).is_err());
        assert!(EfficiencyCurve::new(vec![Point {
            width: 1.0,
            efficiency: 1.5
        }])
        .is_err());
        assert!(EfficiencyCurve::new(vec![Point {
            width: -1.0,
            efficiency: 0.5
        }])
        .is_err());
        let twice = vec![
            Point {
                width: 8.0,
                efficiency: 0.5,
            },
            Point {
                width: 8.0,
                efficiency: 0.6,
            },
        ];
        assert!(EfficiencyCurve::new(twice).is_err());
    }
}
