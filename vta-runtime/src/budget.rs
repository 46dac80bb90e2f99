//! The memory budget: the most bytes a model's tensors may take, checked from their facts
//! before anything is allocated, by the importer (every inferred tensor), the planner and the
//! compiled-model loader. A model whose shapes (huge pads, say) ask for more is refused with
//! the tensor's name and size instead of aborting on an allocation or running for minutes.

use crate::tensor::{DType, Fact};

/// The budget when none is chosen: 4 GiB for all of a model's tensors together.
pub const DEFAULT_MEMORY_BUDGET: u64 = 4 << 30;

/// Parses a byte count: a whole number with an optional binary unit (`B`, `KiB`, `MiB`, `GiB`,
/// `TiB`; `K`, `M`, `G`, `T` mean the same).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let not_a_size =
        || format!("'{s}' is not a size; write e.g. 512MiB, 8GiB or a number of bytes");
    if digits.is_empty() {
        return Err(not_a_size());
    }
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        u => {
            return Err(format!(
                "unknown unit '{u}' in '{s}'; write a whole number of bytes, optionally with \
                 KiB, MiB, GiB or TiB (e.g. 8GiB)"
            ))
        }
    };
    let n: u64 = digits.parse().map_err(|_| {
        format!("'{s}' is not a size; write e.g. 512MiB, 8GiB or a number of bytes")
    })?;
    n.checked_mul(1 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("'{s}' is not a usable size: it must be above 0 and below 16 EiB"))
}

/// Bytes of one element.
pub fn elem_bytes(dtype: DType) -> u64 {
    match dtype {
        DType::I8 | DType::U8 => 1,
        DType::F32 | DType::I32 => 4,
        DType::I64 => 8,
    }
}

/// Bytes of a tensor of `fact`, or `None` when that does not fit a `u64`.
pub fn fact_bytes(fact: &Fact) -> Option<u64> {
    fact.shape
        .iter()
        .try_fold(elem_bytes(fact.dtype), |n, &d| n.checked_mul(d as u64))
}

/// `n` bytes for people: `512 B`, `1.5 KiB`, `3.2 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A running account of tensor bytes against a limit.
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    limit: u64,
    used: u64,
}

impl MemoryBudget {
    pub fn new(limit: u64) -> Self {
        MemoryBudget { limit, used: 0 }
    }

    /// Adds tensor `name` of `fact`; refuses it when it alone, or all tensors so far with it,
    /// exceed the limit.
    pub fn charge(&mut self, name: &str, fact: &Fact) -> Result<(), String> {
        let limit = human_bytes(self.limit);
        let Some(bytes) = fact_bytes(fact).filter(|&b| b <= self.limit) else {
            let size = fact_bytes(fact).map_or_else(|| "more than 16 EiB".into(), human_bytes);
            return Err(format!(
                "tensor '{name}' ({fact}) would take {size}, beyond the memory budget of \
                 {limit}; check the model's shapes, pads and strides (or raise the budget \
                 with --memory-budget)"
            ));
        };
        let total = self.used.saturating_add(bytes);
        if total > self.limit {
            return Err(format!(
                "tensor '{name}' ({fact}, {}) brings the model's tensors to {}, beyond the \
                 memory budget of {limit}; check the model's shapes, pads and strides (or \
                 raise the budget with --memory-budget)",
                human_bytes(bytes),
                human_bytes(total)
            ));
        }
        self.used = total;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units_and_bad_ones_are_named() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("8G"), Ok(8 << 30));
        assert_eq!(parse_size("2 TiB"), Ok(2 << 40));
        assert!(parse_size("8GB").unwrap_err().contains("unknown unit 'GB'"));
        assert!(parse_size("lots").unwrap_err().contains("is not a size"));
        assert!(parse_size("0").unwrap_err().contains("above 0"));
        assert!(parse_size("99999999T")
            .unwrap_err()
            .contains("below 16 EiB"));
    }

    #[test]
    fn a_tensor_beyond_the_budget_is_refused_with_its_name_and_size() {
        let mut b = MemoryBudget::new(1 << 20);
        b.charge("x", &Fact::new(DType::F32, [1, 256, 1024]))
            .unwrap();
        let e = b.charge("huge", &Fact::new(DType::F32, [1, 3, 100_000, 100_000]));
        assert_eq!(
            e.unwrap_err(),
            "tensor 'huge' (float[1, 3, 100000, 100000]) would take 111.8 GiB, beyond the \
             memory budget of 1.0 MiB; check the model's shapes, pads and strides (or raise \
             the budget with --memory-budget)"
        );
        let e = b.charge("y", &Fact::new(DType::I8, [1, 1024])).unwrap_err();
        assert!(e.contains("brings the model's tensors to 1.0 MiB"), "{e}");
        let e = b
            .charge("z", &Fact::new(DType::I64, [usize::MAX, 2]))
            .unwrap_err();
        assert!(e.contains("more than 16 EiB"), "{e}");
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(4 << 30), "4.0 GiB");
    }
}
