//! The simulator's view of DRAM: a byte-addressed physical memory.

use std::fmt;

/// Physical memory as the accelerator's DMA engines see it (byte addresses).
pub trait Memory {
    /// Reads `buf.len()` bytes starting at `addr`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemFault>;
    /// Writes `data` starting at `addr`.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemFault>;
}

/// Whether a faulting access was a read or a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// An access outside the memory: what was attempted and what exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemFault {
    pub access: Access,
    pub addr: u64,
    pub len: u64,
    /// The range of valid addresses, `[start, end)`.
    pub valid: (u64, u64),
}

impl fmt::Display for MemFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.access {
            Access::Read => "read",
            Access::Write => "write",
        };
        write!(
            f,
            "DRAM {what} of {} bytes at {:#x} is outside memory [{:#x}, {:#x})",
            self.len, self.addr, self.valid.0, self.valid.1
        )
    }
}

impl std::error::Error for MemFault {}

/// A flat physical memory of `size` bytes starting at byte address `base`, zero-initialized.
#[derive(Clone)]
pub struct Dram {
    base: u64,
    data: Vec<u8>,
}

impl fmt::Debug for Dram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dram")
            .field("base", &format_args!("{:#x}", self.base))
            .field("size", &self.data.len())
            .finish()
    }
}

impl Dram {
    /// A zeroed memory covering `[base, base + size)`.
    pub fn new(base: u64, size: usize) -> Self {
        Dram {
            base,
            data: vec![0; size],
        }
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn size(&self) -> u64 {
        self.data.len() as u64
    }

    /// One past the last valid address.
    pub fn end(&self) -> u64 {
        self.base + self.size()
    }

    /// The whole memory as bytes; index 0 is address `base`.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// The byte range `[addr, addr + len)` as an index range into [`Dram::bytes`].
    fn span(
        &self,
        access: Access,
        addr: u64,
        len: usize,
    ) -> Result<std::ops::Range<usize>, MemFault> {
        let fault = || MemFault {
            access,
            addr,
            len: len as u64,
            valid: (self.base, self.end()),
        };
        let start = addr.checked_sub(self.base).ok_or_else(fault)?;
        let end = start.checked_add(len as u64).ok_or_else(fault)?;
        if end > self.size() {
            return Err(fault());
        }
        Ok(start as usize..end as usize)
    }

    /// Borrows `len` bytes at `addr`.
    pub fn slice(&self, addr: u64, len: usize) -> Result<&[u8], MemFault> {
        let r = self.span(Access::Read, addr, len)?;
        Ok(&self.data[r])
    }

    /// Mutably borrows `len` bytes at `addr`.
    pub fn slice_mut(&mut self, addr: u64, len: usize) -> Result<&mut [u8], MemFault> {
        let r = self.span(Access::Write, addr, len)?;
        Ok(&mut self.data[r])
    }
}

impl Memory for Dram {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        buf.copy_from_slice(self.slice(addr, buf.len())?);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemFault> {
        self.slice_mut(addr, data.len())?.copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_inside_and_faults_outside() {
        let mut d = Dram::new(0x1000, 64);
        d.write(0x1010, &[1, 2, 3]).unwrap();
        let mut b = [0u8; 4];
        d.read(0x100f, &mut b).unwrap();
        assert_eq!(b, [0, 1, 2, 3]);
        let e = d.read(0x103e, &mut b).unwrap_err();
        assert_eq!(e.addr, 0x103e);
        assert!(
            e.to_string()
                .contains("read of 4 bytes at 0x103e is outside memory [0x1000, 0x1040)"),
            "{e}"
        );
        assert!(d.write(0xfff, &[0]).is_err());
        assert!(d.read(u64::MAX, &mut b).is_err());
        d.write(0x1040, &[]).unwrap();
    }
}
