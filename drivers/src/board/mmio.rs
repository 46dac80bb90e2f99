//! Shared memory mappings of device files: the accelerator's register window (a UIO map or
//! `/dev/mem` at a physical address), read and written as 32-bit volatile words, and the
//! u-dma-buf memory, read and written as bytes.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::ptr::NonNull;

use super::{io_err, BoardError};

/// A `MAP_SHARED` mapping of `len` bytes at byte `offset` of a file, unmapped on drop.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// The mapping is plain memory owned by this value; access goes through `&self`/`&mut self`.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `[offset, offset + len)` of `path` read-write. `sync` opens with `O_SYNC`, which
    /// makes `/dev/mem` map the range uncached (device registers); u-dma-buf memory is opened
    /// without it so the CPU caches it and the sync files keep it coherent.
    pub fn open(path: &Path, offset: u64, len: usize, sync: bool) -> Result<Mapping, BoardError> {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        if sync {
            o.custom_flags(libc::O_SYNC);
        }
        let file: File = o.open(path).map_err(|e| io_err("open", path, e))?;
        let off = libc::off_t::try_from(offset).map_err(|_| BoardError::Address {
            detail: format!(
                "offset {offset:#x} of {} does not fit this platform's file offsets",
                path.display()
            ),
        })?;
        if len == 0 {
            return Err(BoardError::Address {
                detail: format!("empty mapping of {}", path.display()),
            });
        }
        // SAFETY: a fresh mapping chosen by the kernel; the fd may be closed after mmap.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io_err("mmap", path, std::io::Error::last_os_error()));
        }
        Ok(Mapping {
            ptr: NonNull::new(p.cast()).expect("mmap succeeded"),
            len,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Reads the 32-bit word at byte `offset` (4-aligned, inside the mapping) with one
    /// volatile load, as the bus needs for a register.
    pub fn read32(&self, offset: usize) -> u32 {
        self.check_word(offset);
        // SAFETY: in bounds and aligned (checked); the mapping lives as long as self.
        unsafe { self.ptr.as_ptr().add(offset).cast::<u32>().read_volatile() }
    }

    /// Writes the 32-bit word at byte `offset` with one volatile store.
    pub fn write32(&mut self, offset: usize, value: u32) {
        self.check_word(offset);
        // SAFETY: as in read32.
        unsafe {
            self.ptr
                .as_ptr()
                .add(offset)
                .cast::<u32>()
                .write_volatile(value)
        }
    }

    fn check_word(&self, offset: usize) {
        assert!(
            offset.is_multiple_of(4) && offset + 4 <= self.len,
            "register offset {offset:#x} outside the {}-byte window",
            self.len
        );
    }

    /// Copies `out.len()` bytes at byte `offset` out of the mapping. Raw copies, not slices:
    /// the device (or the emulator) writes this memory behind the program's back.
    pub fn read_bytes(&self, offset: usize, out: &mut [u8]) {
        assert!(offset + out.len() <= self.len, "read past the mapping");
        // SAFETY: in bounds (checked); `out` is a distinct host buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                out.as_mut_ptr(),
                out.len(),
            )
        }
    }

    /// Copies `data` into the mapping at byte `offset`.
    pub fn write_bytes(&mut self, offset: usize, data: &[u8]) {
        assert!(offset + data.len() <= self.len, "write past the mapping");
        // SAFETY: in bounds (checked); `data` is a distinct host buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len())
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what open mapped.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The system page size.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}
