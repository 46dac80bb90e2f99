//! Device-memory placement by liveness: tensors whose lifetimes (inclusive ranges of plan
//! steps) do not overlap may share bytes, so the arena holding a network's activations needs
//! about the largest working set, not the sum of all tensors.

/// One tensor to place: its size and the steps during which it must keep its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    pub size: u64,
    /// First step that writes or needs it.
    pub first: usize,
    /// Last step that reads it (inclusive).
    pub last: usize,
}

impl Lifetime {
    fn overlaps(&self, o: &Lifetime) -> bool {
        self.first <= o.last && o.first <= self.last
    }
}

/// Byte offsets (multiples of `align`, a power of two) for `items` such that two items whose
/// lifetimes overlap never share a byte, and the arena size they span. Greedy best-known
/// heuristic: the largest tensors first, each at the lowest offset free for its lifetime.
pub fn place(items: &[Lifetime], align: u64) -> (Vec<u64>, u64) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(items[i].size), items[i].first, i));
    let mut offsets = vec![0u64; items.len()];
    let mut placed: Vec<usize> = Vec::with_capacity(items.len());
    let mut total = 0u64;
    for i in order {
        let it = items[i];
        let mut busy: Vec<(u64, u64)> = placed
            .iter()
            .filter(|&&j| items[j].overlaps(&it))
            .map(|&j| (offsets[j], offsets[j] + items[j].size))
            .collect();
        busy.sort_unstable();
        let mut at = 0u64;
        for (start, end) in busy {
            if at + it.size <= start {
                break;
            }
            at = at.max(end.next_multiple_of(align));
        }
        offsets[i] = at;
        total = total.max((at + it.size).next_multiple_of(align));
        placed.push(i);
    }
    (offsets, total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lt(size: u64, first: usize, last: usize) -> Lifetime {
        Lifetime { size, first, last }
    }

    #[test]
    fn a_chain_reuses_memory() {
        // a -> b -> c -> d: each tensor lives across two steps, so two buffers suffice.
        let items = [lt(100, 0, 1), lt(100, 1, 2), lt(100, 2, 3), lt(100, 3, 4)];
        let (offs, total) = place(&items, 64);
        assert_eq!(total, 256);
        assert_eq!(offs[0], offs[2]);
        assert_ne!(offs[0], offs[1]);
    }

    #[test]
    fn a_residual_stays_live() {
        // x is read again at step 3, so neither y nor z may take its bytes.
        let items = [lt(64, 0, 3), lt(64, 1, 2), lt(64, 2, 3)];
        let (offs, _) = place(&items, 64);
        assert_ne!(offs[1], offs[0]);
        assert_ne!(offs[2], offs[0]);
        assert_ne!(offs[2], offs[1]);
    }

    proptest! {
        #[test]
        fn live_tensors_never_share_bytes(
            raw in prop::collection::vec((1u64..5000, 0usize..20, 0usize..6), 0..40),
        ) {
            let items: Vec<Lifetime> =
                raw.iter().map(|&(s, f, len)| lt(s, f, f + len)).collect();
            let (offs, total) = place(&items, 64);
            for (i, a) in items.iter().enumerate() {
                prop_assert_eq!(offs[i] % 64, 0);
                prop_assert!(offs[i] + a.size <= total);
                for (j, b) in items.iter().enumerate().skip(i + 1) {
                    if a.overlaps(b) {
                        let apart = offs[i] + a.size <= offs[j] || offs[j] + b.size <= offs[i];
                        prop_assert!(apart, "{:?}@{} and {:?}@{}", a, offs[i], b, offs[j]);
                    }
                }
            }
            let sum: u64 = items.iter().map(|a| a.size.next_multiple_of(64)).sum();
            prop_assert!(total <= sum);
        }
    }
}
