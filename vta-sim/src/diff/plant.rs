//! A planted mismatch, to test the differential campaign itself (that it finds a difference,
//! names its unit, writes a reproducer and replays it): the RTL device with one deliberate bug.

use drivers::{Buffer, Device, DeviceError, RunReport, RunTimeout};
use isa::{HwConfig, Insn, MemType};

use crate::rtl::RtlDevice;

/// The RTL, except that after a run whose stream has at least `store + 1` STOREs (that move
/// data), the first byte STORE number `store` wrote is flipped (XOR 0x5a). A run with fewer
/// STOREs is left alone, so the bisection of the first differing STORE finds exactly that one.
pub struct Planted<'a> {
    pub rtl: &'a mut RtlDevice,
    /// Which STORE of the stream (from 0) is corrupted.
    pub store: usize,
}

impl Device for Planted<'_> {
    fn name(&self) -> &str {
        "rtl (with a planted mismatch)"
    }
    fn config(&self) -> &HwConfig {
        self.rtl.config()
    }
    fn alloc(&mut self, size: u64, align: u64) -> Result<Buffer, DeviceError> {
        self.rtl.alloc(size, align)
    }
    fn free(&mut self, buf: Buffer) -> Result<(), DeviceError> {
        self.rtl.free(buf)
    }
    fn copy_to_device(&mut self, b: &Buffer, off: u64, d: &[u8]) -> Result<(), DeviceError> {
        self.rtl.copy_to_device(b, off, d)
    }
    fn copy_from_device(&mut self, b: &Buffer, off: u64, d: &mut [u8]) -> Result<(), DeviceError> {
        self.rtl.copy_from_device(b, off, d)
    }
    fn flush(&mut self, b: &Buffer, off: u64, n: u64) -> Result<(), DeviceError> {
        self.rtl.flush(b, off, n)
    }
    fn invalidate(&mut self, b: &Buffer, off: u64, n: u64) -> Result<(), DeviceError> {
        self.rtl.invalidate(b, off, n)
    }
    fn run(&mut self, addr: u64, count: u32, t: RunTimeout) -> Result<RunReport, DeviceError> {
        let report = self.rtl.run(addr, count, t)?;
        let cfg = self.rtl.config().clone();
        let mut bytes = vec![0u8; count as usize * isa::INSN_BYTES];
        self.rtl.sim().memory().read(addr, &mut bytes);
        // The RTL has just run this stream, so it decodes.
        let stream = isa::Codec::new(&cfg)
            .decode_stream(&bytes)
            .map_err(|e| DeviceError::Program(e.to_string()))?;
        let store = stream
            .iter()
            .filter_map(|i| match i {
                Insn::Store(m) if m.x_size > 0 => Some(*m),
                _ => None,
            })
            .nth(self.store);
        if let Some(m) = store {
            let at = m.dram_base as u64 * cfg.elem_bytes(MemType::Out) as u64;
            let mut b = [0u8];
            self.rtl.sim().memory().read(at, &mut b);
            self.rtl.sim_mut().memory_mut().write(at, &[b[0] ^ 0x5a]);
        }
        Ok(report)
    }
}
