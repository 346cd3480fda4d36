//! A cheap hasher for maps looked up per stall, per culprit or per record (the attribution's
//! CPUs, threads and culprit names; the decoder's record fields): a multiply and a rotate per
//! word (rustc's FxHash) instead of std's SipHash, which was a tenth of a stall's cost in the
//! ranking alone. Not proof against keys
//! chosen to collide (task names are a local user's to choose), which is why every map keyed
//! by them here is bounded (`MAX_CULPRITS`, `CULPRITS_TALLIED`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with `FastHasher`.
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// The Fibonacci multiplier (2^64 / golden ratio): spreads a small integer over the word.
const K: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.add(u64::from_le_bytes(w.try_into().unwrap_or_default()));
        }
        let mut rest = words.remainder();
        if rest.len() >= 4 {
            self.add(u64::from(u32::from_le_bytes(
                rest[..4].try_into().unwrap_or_default(),
            )));
            rest = &rest[4..];
        }
        for &b in rest {
            self.add(u64::from(b));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash(x: impl Hash) -> u64 {
        BuildHasherDefault::<FastHasher>::default().hash_one(x)
    }

    #[test]
    fn a_cpu_number_is_one_multiplication() {
        assert_eq!(hash(3u32), 3u64.wrapping_mul(K));
    }

    #[test]
    fn every_byte_of_a_text_counts() {
        let names = [
            "kworker/1:1",
            "kworker/1:2",
            "kworker/11:1",
            "a",
            "b",
            "",
            "ab",
            "ba",
        ];
        let mut seen: Vec<u64> = names.iter().map(hash).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), names.len());
    }
}
