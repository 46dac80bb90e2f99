//! A first-fit allocator of physical address ranges, shared by the simulated backends.

use std::collections::BTreeMap;

use crate::{Buffer, DeviceError};

/// Hands out page-aligned, page-rounded ranges of `[base, base + size)`, first fit, and
/// merges freed neighbours back together.
#[derive(Debug, Clone)]
pub struct Allocator {
    base: u64,
    size: u64,
    page: u64,
    /// Free ranges as (start, length), sorted by start, never adjacent.
    free: Vec<(u64, u64)>,
    /// Live allocations: id -> (start, length).
    live: BTreeMap<u64, (u64, u64)>,
    next_id: u64,
}

impl Allocator {
    /// Manages `[base, base + size)` in units of `page` bytes (a power of two; `base` and
    /// `size` must be multiples of it).
    pub fn new(base: u64, size: u64, page: u64) -> Self {
        assert!(
            page.is_power_of_two(),
            "page size {page} is not a power of two"
        );
        assert!(
            (base | size) & (page - 1) == 0,
            "memory [{base:#x}, +{size:#x}) is not page-aligned"
        );
        Allocator {
            base,
            size,
            page,
            free: if size > 0 { vec![(base, size)] } else { vec![] },
            live: BTreeMap::new(),
            next_id: 1,
        }
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn page(&self) -> u64 {
        self.page
    }

    /// Bytes not allocated.
    pub fn free_bytes(&self) -> u64 {
        self.free.iter().map(|f| f.1).sum()
    }

    /// The largest free range.
    pub fn largest_free(&self) -> u64 {
        self.free.iter().map(|f| f.1).max().unwrap_or(0)
    }

    /// Live allocations.
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// Allocates `size` bytes (rounded up to whole pages; 0 gets one page) at an address
    /// aligned to `align` (a power of two) and to the page.
    pub fn alloc(&mut self, size: u64, align: u64) -> Result<Buffer, DeviceError> {
        if !align.is_power_of_two() {
            return Err(DeviceError::BadAlign { align });
        }
        let align = align.max(self.page);
        let oom = || DeviceError::OutOfMemory {
            requested: size,
            align,
            free: self.free_bytes(),
            largest: self.largest_free(),
        };
        let len = size
            .max(1)
            .checked_next_multiple_of(self.page)
            .ok_or_else(oom)?;
        let (slot, start) = self
            .free
            .iter()
            .enumerate()
            .find_map(|(i, &(fs, fl))| {
                let start = fs.checked_next_multiple_of(align)?;
                (start.checked_add(len)? <= fs + fl).then_some((i, start))
            })
            .ok_or_else(oom)?;
        let (fs, fl) = self.free[slot];
        let mut rest = Vec::with_capacity(2);
        if start > fs {
            rest.push((fs, start - fs));
        }
        if start + len < fs + fl {
            rest.push((start + len, fs + fl - start - len));
        }
        self.free.splice(slot..=slot, rest);
        let id = self.next_id;
        self.next_id += 1;
        self.live.insert(id, (start, len));
        Ok(Buffer {
            phys_addr: start,
            size,
            id,
        })
    }

    /// Checks that `buf` is a live allocation of this allocator.
    /// Checks that `buf` is live and `offset..offset + len` lies inside it (naming `what` in
    /// the error), and returns the physical address of `offset`: the one validation every
    /// simulated device does before touching its memory.
    pub fn access(
        &self,
        what: &'static str,
        buf: &Buffer,
        offset: u64,
        len: u64,
    ) -> Result<u64, DeviceError> {
        self.check(buf)?;
        crate::check_range(what, buf, offset, len)?;
        Ok(buf.phys_addr + offset)
    }

    pub fn check(&self, buf: &Buffer) -> Result<(), DeviceError> {
        match self.live.get(&buf.id) {
            Some(&(start, len)) if start == buf.phys_addr && buf.size <= len => Ok(()),
            _ => Err(DeviceError::UnknownBuffer {
                id: buf.id,
                phys_addr: buf.phys_addr,
            }),
        }
    }

    /// Returns `buf`'s range to the free list.
    pub fn free(&mut self, buf: &Buffer) -> Result<(), DeviceError> {
        self.check(buf)?;
        let (start, len) = self.live.remove(&buf.id).expect("checked live");
        let at = self.free.partition_point(|f| f.0 < start);
        self.free.insert(at, (start, len));
        // Merge with the next, then with the previous range.
        if at + 1 < self.free.len() && self.free[at].0 + self.free[at].1 == self.free[at + 1].0 {
            self.free[at].1 += self.free[at + 1].1;
            self.free.remove(at + 1);
        }
        if at > 0 && self.free[at - 1].0 + self.free[at - 1].1 == self.free[at].0 {
            self.free[at - 1].1 += self.free[at].1;
            self.free.remove(at);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x1000_0000;

    #[test]
    fn first_fit_page_rounding_and_alignment() {
        let mut a = Allocator::new(BASE, 64 << 10, 4096);
        let b1 = a.alloc(100, 64).unwrap();
        assert_eq!((b1.phys_addr, b1.size), (BASE, 100));
        let b2 = a.alloc(4097, 1).unwrap();
        assert_eq!(b2.phys_addr, BASE + 4096, "one page for 100 bytes");
        let b3 = a.alloc(0, 16 << 10).unwrap();
        assert_eq!(b3.phys_addr, BASE + (16 << 10), "aligned past the gap");
        assert_eq!(a.free_bytes(), (64 - 16) << 10, "4 + 8 + 4 KiB allocated");
        // The gap before b3 is reused first fit.
        let b4 = a.alloc(4096, 4096).unwrap();
        assert_eq!(b4.phys_addr, BASE + 3 * 4096);
        assert_eq!(a.live(), 4);
        assert_ne!(b1.id, b2.id);
    }

    #[test]
    fn free_merges_neighbours_and_rejects_double_free() {
        let mut a = Allocator::new(BASE, 16 << 10, 4096);
        let bs: Vec<Buffer> = (0..4).map(|_| a.alloc(4096, 1).unwrap()).collect();
        assert!(a.alloc(1, 1).is_err());
        a.free(&bs[1]).unwrap();
        a.free(&bs[3]).unwrap();
        a.free(&bs[2]).unwrap();
        assert_eq!(
            a.largest_free(),
            12 << 10,
            "three pages merged into one range"
        );
        let e = a.free(&bs[2]).unwrap_err();
        assert!(matches!(e, DeviceError::UnknownBuffer { .. }), "{e}");
        a.free(&bs[0]).unwrap();
        assert_eq!(a.largest_free(), 16 << 10);
        assert_eq!(a.live(), 0);
        let whole = a.alloc(16 << 10, 1).unwrap();
        assert_eq!(whole.phys_addr, BASE);
    }

    #[test]
    fn errors_say_what_was_asked_and_what_is_left() {
        let mut a = Allocator::new(BASE, 16 << 10, 4096);
        let _keep = a.alloc(4096, 1).unwrap();
        let e = a.alloc(16 << 10, 1).unwrap_err().to_string();
        assert_eq!(
            e,
            "out of device memory: 16384 bytes aligned to 4096 requested, 12288 bytes free, \
             largest free range 12288 bytes"
        );
        let e = a.alloc(1, 3).unwrap_err().to_string();
        assert!(e.contains("alignment 3 is not a power of two"), "{e}");
        let forged = Buffer {
            phys_addr: BASE,
            size: 1,
            id: 99,
        };
        assert!(a.check(&forged).is_err());
        assert!(a.alloc(u64::MAX, 1).is_err());
    }
}
