//! The toolkit's one seeded pseudo-random generator (SplitMix64), for tests, benchmarks and
//! generated data: small, without dependencies, and identical on every platform, so that a
//! seed names the same data everywhere. Not for anything that needs unpredictability.

/// SplitMix64 (Steele, Lea and Flood), seeded with any `u64`.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `lo..=hi` for any integer type up to 64 bits; panics if `lo > hi`.
    pub fn range<T>(&mut self, lo: T, hi: T) -> T
    where
        T: Copy + Into<i128> + TryFrom<i128>,
    {
        let (l, h): (i128, i128) = (lo.into(), hi.into());
        assert!(l <= h, "empty range {l}..={h}");
        let span = h - l + 1;
        let offset = match u64::try_from(span) {
            Ok(span) => i128::from(self.below(span)),
            Err(_) => i128::from(self.next_u64()),
        };
        T::try_from(l + offset).unwrap_or_else(|_| unreachable!("lo + offset lies in lo..=hi"))
    }

    /// The low `width` bits of a draw: uniform in `0..2^width` (all 64 bits from 64 on).
    pub fn bits(&mut self, width: u32) -> u64 {
        match width {
            64.. => self.next_u64(),
            w => self.next_u64() & ((1 << w) - 1),
        }
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next_u64() >> 56) as u8).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // The first outputs for seed 0 of the reference implementation.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn ranges_stay_inside_and_reach_both_ends() {
        let mut r = Rng::new(7);
        let (mut lo_seen, mut hi_seen) = (false, false);
        for _ in 0..1000 {
            let v: i64 = r.range(-3, 3);
            assert!((-3..=3).contains(&v));
            lo_seen |= v == -3;
            hi_seen |= v == 3;
            let u: u32 = r.range(5, 5);
            assert_eq!(u, 5);
        }
        assert!(lo_seen && hi_seen);
        let _: i64 = r.range(i64::MIN, i64::MAX);
        assert_eq!(r.below(0), 0);
        assert_eq!(r.bytes(5).len(), 5);
        assert_eq!(r.bits(0), 0);
        assert!((0..100).all(|_| r.bits(3) < 8));
        assert!((0..100).any(|_| r.bits(64) >> 61 != 0));
    }
}
