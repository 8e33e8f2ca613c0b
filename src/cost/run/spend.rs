//! What a run costs in money and energy: GPU-hours, their price, the energy the GPUs and the
//! datacenter draw, and the emissions of that energy.
//!
//! Every figure is the run's wall-clock days (under the detailed time model, failures,
//! restarts and checkpoints included) times the GPUs it holds: a cluster is paid for, and
//! draws power, while it waits on a restart as while it computes. The inputs are the brief's
//! ([`Spend`]); none has a default that stands for a price. A GPU preset carries its board
//! power (TDP, [`crate::brief::gpu`]), the load figure energy is counted at: an upper bound of
//! what the GPUs draw, which leaves out the host (CPUs, NICs, switches) unless the power given
//! includes it (a DGX H100 is 10.2 kW for 8 GPUs: 1,275 W a GPU, NVIDIA DGX H100 user guide).

use serde::{Deserialize, Serialize};

/// Hours a day.
pub const HOURS_PER_DAY: f64 = 24.0;

/// What the brief says of money and energy; every field may be absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spend {
    /// Price of one GPU for one hour, in the user's currency (no default: prices differ by
    /// provider, contract and year).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_gpu_hour: Option<f64>,
    /// One GPU's power under load, W (a preset's board power, its TDP, unless set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_power_w: Option<f64>,
    /// The datacenter's power usage effectiveness: facility energy over IT energy, ≥ 1
    /// (absent: 1, the GPUs' own energy). The Green Grid's definition (White Paper #49, 2012).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pue: Option<f64>,
    /// The grid's carbon intensity, grams of CO₂-equivalent per kWh (no default: it ranges from
    /// about 20 on hydro and nuclear grids to over 700 on coal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carbon_g_per_kwh: Option<f64>,
}

impl Spend {
    /// Whether nothing is set (the brief then reports no spend; the JSON leaves it out).
    pub fn is_unset(&self) -> bool {
        *self == Spend::default()
    }

    /// Whether a plan reports its spend: when a price or a power is known.
    pub fn reported(&self) -> bool {
        self.price_per_gpu_hour.is_some() || self.gpu_power_w.is_some()
    }

    /// The spend of a run holding `gpus` GPUs for `days` days.
    pub fn of(&self, gpus: u64, days: f64) -> Spent {
        let hours = gpu_hours(gpus, days);
        let energy = self
            .gpu_power_w
            .map(|w| energy_mwh(hours, w, self.pue.unwrap_or(1.0)));
        Spent {
            gpu_hours: hours,
            cost: self.cost_of(gpus, days),
            energy_mwh: energy,
            emissions_t: energy
                .zip(self.carbon_g_per_kwh)
                .map(|(e, c)| emissions_t(e, c)),
        }
    }

    /// What a run holding `gpus` GPUs for `days` days costs, with a price: [`cost`] of its
    /// [`gpu_hours`] (what [`Spend::of`] reports, and what the cost check compares).
    pub fn cost_of(&self, gpus: u64, days: f64) -> Option<f64> {
        self.price_per_gpu_hour
            .map(|p| cost(gpu_hours(gpus, days), p))
    }

    /// The most days a run on `gpus` GPUs may take within `max_cost` at this price (`None`
    /// without a price): cost is linear in days, so the cost limit is a day limit
    /// ([`days_for_cost`]).
    pub fn days_within(&self, gpus: u64, max_cost: f64) -> Option<f64> {
        self.price_per_gpu_hour
            .map(|p| days_for_cost(max_cost, gpus, p))
    }
}

/// One run's spend: the plan's `spend` object.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// GPU-hours held, failures and checkpoints included.
    pub gpu_hours: f64,
    /// GPU-hours × the price (when the brief has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Energy drawn, MWh, the datacenter's overhead (PUE) included (when the brief has a
    /// power).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_mwh: Option<f64>,
    /// Emissions, tonnes of CO₂-equivalent (when the brief has a power and a carbon
    /// intensity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emissions_t: Option<f64>,
}

/// GPU-hours of a run holding `gpus` GPUs for `days`: `gpus × days × 24`.
pub fn gpu_hours(gpus: u64, days: f64) -> f64 {
    gpus as f64 * days * HOURS_PER_DAY
}

/// Cost of `gpu_hours` at `price` a GPU-hour.
pub fn cost(gpu_hours: f64, price: f64) -> f64 {
    gpu_hours * price
}

/// Energy, MWh, of `gpu_hours` at `power_w` a GPU with the facility's `pue`:
/// `GPU-h × W × PUE / 10⁶` (W·h → MWh).
pub fn energy_mwh(gpu_hours: f64, power_w: f64, pue: f64) -> f64 {
    gpu_hours * power_w * pue / 1e6
}

/// Emissions, t CO₂e, of `energy_mwh` at `g_per_kwh`: `MWh × 10³ kWh/MWh × g/kWh / 10⁶ g/t`
/// `= MWh × g/kWh / 10³`.
pub fn emissions_t(energy_mwh: f64, g_per_kwh: f64) -> f64 {
    energy_mwh * g_per_kwh / 1e3
}

/// Days a run on `gpus` GPUs may take at `price` a GPU-hour within `max_cost`:
/// `max_cost / (gpus × 24 × price)`, the inverse of [`gpu_hours`] and [`cost`].
pub fn days_for_cost(max_cost: f64, gpus: u64, price: f64) -> f64 {
    max_cost / (gpus as f64 * HOURS_PER_DAY * price)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_month_on_2048_gpus_by_hand() {
        // 2,048 GPUs × 30 days × 24 h = 1,474,560 GPU-hours; at 2.50 a GPU-hour, 3,686,400;
        // at 700 W and PUE 1.2: 1,474,560 × 700 × 1.2 / 10⁶ = 1,238.6304 MWh; at 400 g/kWh,
        // 1,238.6304 × 400 / 1,000 = 495.45216 t.
        let spend = Spend {
            price_per_gpu_hour: Some(2.5),
            gpu_power_w: Some(700.0),
            pue: Some(1.2),
            carbon_g_per_kwh: Some(400.0),
        };
        let s = spend.of(2048, 30.0);
        assert_eq!(s.gpu_hours, 1_474_560.0);
        assert_eq!(s.cost, Some(3_686_400.0));
        assert!((s.energy_mwh.unwrap() - 1_238.630_4).abs() < 1e-9);
        assert!((s.emissions_t.unwrap() - 495.452_16).abs() < 1e-9);
    }

    #[test]
    fn what_is_not_given_is_not_reported() {
        let s = Spend {
            gpu_power_w: Some(700.0),
            ..Spend::default()
        }
        .of(8, 1.0);
        // PUE absent counts the GPUs' own energy: 192 GPU-h × 700 W = 0.1344 MWh.
        assert_eq!(s.cost, None);
        assert!((s.energy_mwh.unwrap() - 0.1344).abs() < 1e-12);
        assert_eq!(s.emissions_t, None);
        assert!(!Spend::default().reported() && Spend::default().is_unset());
    }

    #[test]
    fn the_cost_limit_is_a_day_limit() {
        let spend = Spend {
            price_per_gpu_hour: Some(2.5),
            ..Spend::default()
        };
        let days = spend.days_within(2048, 3_686_400.0).unwrap();
        assert!((days - 30.0).abs() < 1e-12);
        assert!((spend.of(2048, days).cost.unwrap() - 3_686_400.0).abs() < 1e-6);
        assert_eq!(Spend::default().days_within(2048, 1.0), None);
    }
}
