//! Units used throughout, as SPEC.md §"Units" fixes them.
//!
//! Internally every quantity is in base SI units held in `f64` (bytes, FLOPs, FLOP/s, seconds),
//! or in `u64` where it is a count (parameters, tokens, GPUs). These constants convert at the
//! edges, where a user reads or writes a number.

/// Bytes in one GB. SPEC.md: 1 GB = 10^9 bytes (not GiB).
pub const BYTES_PER_GB: f64 = 1e9;

/// Seconds in one day. SPEC.md: 1 day = 86,400 s.
pub const SECONDS_PER_DAY: f64 = 86_400.0;

/// FLOP/s in one TFLOP/s.
pub const FLOPS_PER_TFLOPS: f64 = 1e12;

/// Bytes as GB.
pub fn gb(bytes: f64) -> f64 {
    bytes / BYTES_PER_GB
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gb_is_ten_to_the_nine_bytes() {
        assert_eq!(gb(1_140e9), 1_140.0);
    }
}
