//! A fast hash for the search's small in-process tables (each shape's distinct choices, each
//! micro-batch's compute): keys made by the program, never by a user, so the protection
//! against chosen collisions that the standard library's SipHash buys is not needed, and its
//! cost (a tenth of a family sweep) is.
//!
//! The mixing step is the one rustc's own `FxHasher` uses (after Firefox's): rotate, xor in
//! the next word, multiply by a fixed odd constant. Iteration order over a map is never used
//! for output (the search's merges are order-free).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The multiplier: `2⁶⁴ / φ` rounded to odd, as in rustc's `FxHasher`.
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// A word-at-a-time multiplicative hasher.
#[derive(Debug, Default, Clone, Copy)]
pub struct FastHasher {
    hash: u64,
}

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    fn hash<T: Hash>(t: &T) -> u64 {
        let mut h = FastHasher::default();
        t.hash(&mut h);
        h.finish()
    }

    #[test]
    fn equal_keys_hash_equal_and_near_keys_apart() {
        assert_eq!(hash(&(8u64, 2u64, true)), hash(&(8u64, 2u64, true)));
        let near: std::collections::HashSet<u64> =
            (0..10_000u64).map(|i| hash(&(i, 1u64))).collect();
        assert_eq!(near.len(), 10_000);
    }

    #[test]
    fn a_map_finds_what_it_holds() {
        let mut m: FastMap<(u64, u8), u64> = FastMap::default();
        for i in 0..1000 {
            m.insert((i, (i % 7) as u8), i * 3);
        }
        assert!((0..1000).all(|i| m[&(i, (i % 7) as u8)] == i * 3));
    }
}
