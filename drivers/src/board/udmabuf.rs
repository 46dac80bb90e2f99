//! Physically contiguous DMA memory from the u-dma-buf kernel module (`/dev/udmabufN` and
//! `/sys/class/u-dma-buf/udmabufN/`), mapped cached, with the module's manual cache
//! maintenance: write `sync_offset`, `sync_size` and `sync_direction`, then `1` to
//! `sync_for_device` (clean: CPU writes reach DRAM) or `sync_for_cpu` (invalidate: the CPU
//! sees what the accelerator wrote). The module performs the cache operation inside that
//! write and records the buffer's owner in `sync_owner` (1: device, 0: CPU), which is read
//! back to confirm the driver accepted the range.

use std::path::{Path, PathBuf};

use super::bitstream::{read_attr, write_attr};
use super::mmio::Mapping;
use super::{BoardError, BoardPaths};

/// `sync_direction` values (the kernel's `enum dma_data_direction`).
const DMA_TO_DEVICE: u32 = 1;
const DMA_FROM_DEVICE: u32 = 2;

/// One u-dma-buf buffer, mapped.
pub struct UDmaBuf {
    map: Mapping,
    phys: u64,
    sys: PathBuf,
}

impl UDmaBuf {
    /// Opens buffer `name` (e.g. `udmabuf0`): its physical address and size from sysfs, its
    /// memory mapped from the device file.
    pub fn open(paths: &BoardPaths, name: &str) -> Result<UDmaBuf, BoardError> {
        let sys = paths.sys.join("class/u-dma-buf").join(name);
        if !sys.exists() {
            return Err(BoardError::NoUDmaBuf {
                sys: sys.clone(),
                name: name.into(),
            });
        }
        let phys = parse_u64(&sys.join("phys_addr"))?;
        let size = parse_u64(&sys.join("size"))?;
        let len = usize::try_from(size).map_err(|_| BoardError::Address {
            detail: format!("u-dma-buf {name} of {size} bytes does not fit this address space"),
        })?;
        let map = Mapping::open(&paths.dev.join(name), 0, len, false)?;
        Ok(UDmaBuf { map, phys, sys })
    }

    pub fn phys_addr(&self) -> u64 {
        self.phys
    }

    pub fn size(&self) -> u64 {
        self.map.len() as u64
    }

    pub fn read(&self, offset: u64, out: &mut [u8]) {
        self.map.read_bytes(offset as usize, out)
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) {
        self.map.write_bytes(offset as usize, data)
    }

    /// Cleans the CPU cache over `[offset, offset + size)`: the accelerator then reads what
    /// the CPU wrote.
    pub fn sync_for_device(&mut self, offset: u64, size: u64) -> Result<(), BoardError> {
        self.sync(offset, size, DMA_TO_DEVICE, "sync_for_device", "1")
    }

    /// Invalidates the CPU cache over `[offset, offset + size)`: the CPU then reads what the
    /// accelerator wrote.
    pub fn sync_for_cpu(&mut self, offset: u64, size: u64) -> Result<(), BoardError> {
        self.sync(offset, size, DMA_FROM_DEVICE, "sync_for_cpu", "0")
    }

    fn sync(
        &mut self,
        offset: u64,
        size: u64,
        direction: u32,
        command: &str,
        owner: &str,
    ) -> Result<(), BoardError> {
        // An empty range has no cache lines: skip the round trip through the driver.
        if size == 0 {
            return Ok(());
        }
        write_attr(&self.sys.join("sync_offset"), &offset.to_string())?;
        write_attr(&self.sys.join("sync_size"), &size.to_string())?;
        write_attr(&self.sys.join("sync_direction"), &direction.to_string())?;
        write_attr(&self.sys.join(command), "1")?;
        let got = read_once(&self.sys.join("sync_owner"))?;
        if got != owner {
            return Err(BoardError::Sync {
                command: command.into(),
                offset,
                size,
                owner: got,
                sys: self.sys.clone(),
            });
        }
        Ok(())
    }
}

/// Reads a sysfs attribute with one `read`, as sysfs serves it (whole, at once).
fn read_once(path: &Path) -> Result<String, BoardError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| super::io_err("open", path, e))?;
    let mut buf = [0u8; 64];
    let n = f
        .read(&mut buf)
        .map_err(|e| super::io_err("read", path, e))?;
    Ok(String::from_utf8_lossy(&buf[..n]).trim().to_string())
}

/// A number as sysfs prints it: `0x`-prefixed hex (`%pad` of `phys_addr`) or decimal.
fn parse_u64(path: &Path) -> Result<u64, BoardError> {
    let s = read_attr(path)?;
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    v.map_err(|_| BoardError::Address {
        detail: format!("{} reads '{s}', not a number", path.display()),
    })
}
