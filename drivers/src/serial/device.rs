//! [`SerialDevice`]: the SoC behind [`Device`], through its UART bridge.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use isa::{Codec, HwConfig, Insn, MemType, INSN_BYTES};

use super::link::{Link, LinkStats, Repeat};
use super::protocol::{self as wire, CONTROL_BASE};
use super::SerialError;
use crate::{regs, Allocator, Buffer, Counters, Device, DeviceError, RunReport, RunTimeout};

/// How a [`SerialDevice`] behaves.
#[derive(Clone, Debug)]
pub struct SerialOptions {
    /// The backend's name in reports and errors (`serial`; the simulated SoC's is
    /// `soc-sim`).
    pub backend: String,
    /// Times a lost or damaged request that may safely be repeated (reads, memory writes) is
    /// sent again before the link is given up.
    pub repeats: u32,
    /// Wall-clock bound of a run when [`RunTimeout::wall`] is not given.
    pub default_wall: Duration,
    /// Bound on polls of CONTROL in a run when [`RunTimeout::work`] is not given.
    pub default_polls: Option<u64>,
    /// Pause between two polls of CONTROL (a poll is already a round trip on the line).
    pub poll_interval: Duration,
}

impl Default for SerialOptions {
    fn default() -> Self {
        SerialOptions {
            backend: "serial".into(),
            repeats: 3,
            default_wall: Duration::from_secs(60),
            default_polls: None,
            poll_interval: Duration::ZERO,
        }
    }
}

/// What the bridge says about the SoC (its info registers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeInfo {
    pub mem_base: u32,
    pub mem_bytes: u32,
    pub clock_hz: u32,
    pub baud: u32,
    /// Cycles of silence after which the bridge abandons a frame.
    pub frame_timeout: u32,
    /// Characters lost on the line since reset (bad stop bit, or the receive buffer full).
    pub rx_errors: u32,
    /// Frames answered with an error status since reset.
    pub frame_errors: u32,
}

/// A decoded instruction stream's counters and the DRAM bytes its STOREs may write, kept
/// while nothing overwrites the stream.
struct KnownStream {
    addr: u64,
    count: u32,
    counters: Counters,
    stores: Vec<(u64, u64)>,
}

/// The SoC through its UART bridge over the byte stream `S` (a serial port, or the
/// simulated SoC's line): see the module docs of [`crate::serial`].
pub struct SerialDevice<S> {
    cfg: HwConfig,
    link: Link<S>,
    info: BridgeInfo,
    alloc: Allocator,
    opts: SerialOptions,
    known: Vec<KnownStream>,
}

fn unavailable(backend: &str, e: SerialError) -> DeviceError {
    DeviceError::Unavailable {
        backend: backend.to_string(),
        source: Box::new(e),
    }
}

impl<S: Read + Write> SerialDevice<S> {
    /// Opens the device on `stream` (called `port` in messages): drains what an earlier
    /// session left on the line, pings the bridge, reads its info registers, and checks the
    /// accelerator's identity against `cfg`.
    pub fn open(
        stream: S,
        port: &str,
        cfg: &HwConfig,
        opts: SerialOptions,
    ) -> Result<SerialDevice<S>, SerialError> {
        let mut link = Link::new(stream, port, opts.repeats);
        link.drain()?;
        link.nop().map_err(|e| {
            let e = e.to_string();
            SerialError::NoBridge {
                port: port.to_string(),
                detail: e
                    .strip_prefix(&format!("{port}: "))
                    .unwrap_or(&e)
                    .to_string(),
            }
        })?;
        let info = read_info(&mut link)?;
        let mut host = LinkHost::unbounded(&mut link);
        match regs::check_identity(&mut host, cfg) {
            Ok(Ok(())) => {}
            Ok(Err(detail)) => {
                return Err(SerialError::Identity {
                    port: port.to_string(),
                    detail,
                })
            }
            Err(stop) => return Err(stop.into_link_error()),
        }
        let page = crate::PAGE_SIZE;
        if u64::from(info.mem_bytes) < page || u64::from(info.mem_base) % page != 0 {
            return Err(SerialError::NoBridge {
                port: port.to_string(),
                detail: format!(
                    "its device memory ({} bytes at {:#x}) is not whole pages",
                    info.mem_bytes, info.mem_base
                ),
            });
        }
        Ok(SerialDevice {
            cfg: cfg.clone(),
            alloc: Allocator::new(info.mem_base.into(), info.mem_bytes.into(), page),
            info,
            link,
            opts,
            known: Vec::new(),
        })
    }

    /// The bridge's info registers as read when the device was opened.
    pub fn info(&self) -> &BridgeInfo {
        &self.info
    }

    /// The bridge's info registers now (the error counters change).
    pub fn read_info(&mut self) -> Result<BridgeInfo, DeviceError> {
        read_info(&mut self.link).map_err(|e| unavailable(&self.opts.backend, e))
    }

    /// What the link has done so far.
    pub fn link_stats(&self) -> LinkStats {
        self.link.stats()
    }

    /// The byte stream.
    pub fn stream(&self) -> &S {
        self.link.stream()
    }

    /// The byte stream, e.g. to advance a simulation.
    pub fn stream_mut(&mut self) -> &mut S {
        self.link.stream_mut()
    }

    /// The allocator, to inspect free space.
    pub fn allocator(&self) -> &Allocator {
        &self.alloc
    }

    fn link_error(&self, e: SerialError) -> DeviceError {
        unavailable(&self.opts.backend, e)
    }

    /// Forgets what is known of streams that overlap `[start, end)`.
    fn overwritten(&mut self, start: u64, end: u64) {
        self.known.retain(|k| {
            let k_end = k.addr + u64::from(k.count) * INSN_BYTES as u64;
            k_end <= start || end <= k.addr
        });
    }

    /// The counters and STORE ranges of the `count` instructions at `addr`: known from an
    /// earlier run of the same stream, else read back and decoded.
    fn known_stream(&mut self, addr: u64, count: u32) -> Result<usize, DeviceError> {
        if let Some(i) = self
            .known
            .iter()
            .position(|k| k.addr == addr && k.count == count)
        {
            return Ok(i);
        }
        let len = u64::from(count) * INSN_BYTES as u64;
        let (base, size) = (self.alloc.base(), self.alloc.size());
        if addr < base || addr + len > base + size || addr & (INSN_BYTES as u64 - 1) != 0 {
            return Err(DeviceError::Program(format!(
                "{count} instructions at {addr:#x} are not inside the device memory \
                 [{base:#x}, +{size:#x}), 16-byte aligned"
            )));
        }
        let words = self
            .link
            .read(addr as u32, len as usize / 4)
            .map_err(|e| self.link_error(e))?;
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let insns = Codec::new(&self.cfg)
            .decode_stream(&bytes)
            .map_err(|e| DeviceError::Program(e.to_string()))?;
        let out_bytes = u64::from(self.cfg.elem_bytes(MemType::Out));
        let stores = insns
            .iter()
            .filter_map(|i| match i {
                Insn::Store(s) if s.x_size > 0 && s.y_size > 0 => {
                    let first = u64::from(s.dram_base);
                    let last = first
                        + u64::from(s.y_size - 1) * u64::from(s.x_stride)
                        + u64::from(s.x_size);
                    Some((first * out_bytes, last * out_bytes))
                }
                _ => None,
            })
            .collect();
        self.known.push(KnownStream {
            addr,
            count,
            counters: Counters::of_stream(&self.cfg, &insns),
            stores,
        });
        Ok(self.known.len() - 1)
    }

    /// Waits, within `deadline`, until no earlier (timed-out) run is still going.
    fn wait_idle(&mut self, t: Instant, wall: Duration) -> Result<(), DeviceError> {
        loop {
            let c = self
                .link
                .read(CONTROL_BASE + regs::CONTROL, 1)
                .map_err(|e| self.link_error(e))?[0];
            if c & regs::CONTROL_RUNNING == 0 {
                return Ok(());
            }
            if t.elapsed() >= wall {
                return Err(self.timeout(format!(
                    "the accelerator is still running an earlier run that timed out, after \
                     waiting {wall:?}; {NO_RESET}"
                )));
            }
            std::thread::sleep(self.opts.poll_interval);
        }
    }

    fn timeout(&self, detail: String) -> DeviceError {
        DeviceError::Timeout {
            backend: self.opts.backend.clone(),
            detail,
        }
    }
}

/// What the error of a timed-out run says about the accelerator.
const NO_RESET: &str = "the accelerator has no reset register, so it may still be running \
                        that stream: the next run waits for it to finish; if it never does, \
                        reset the board (its reset pin, or reload the bitstream)";

/// Reads and checks the bridge's info registers.
fn read_info<S: Read + Write>(link: &mut Link<S>) -> Result<BridgeInfo, SerialError> {
    let v = link.read(wire::INFO_BASE, (wire::INFO_BYTES / 4) as usize)?;
    if v[0] != wire::ID_VALUE {
        return Err(SerialError::NoBridge {
            port: link.port().to_string(),
            detail: format!(
                "its ID register reads {:#010x}, not {:#010x} (a VTA UART bridge of protocol \
                 version 1)",
                v[0],
                wire::ID_VALUE
            ),
        });
    }
    Ok(BridgeInfo {
        mem_base: v[1],
        mem_bytes: v[2],
        clock_hz: v[3],
        baud: v[4],
        frame_timeout: v[5],
        rx_errors: v[6],
        frame_errors: v[7],
    })
}

/// Why the register sequence stopped.
enum Stop {
    Link(SerialError),
    Wall(Duration),
    Polls(u64),
}

impl Stop {
    /// The link error (identity checks only read, so they stop for no other reason).
    fn into_link_error(self) -> SerialError {
        match self {
            Stop::Link(e) => e,
            Stop::Wall(_) | Stop::Polls(_) => unreachable!("reads without polling never time out"),
        }
    }
}

/// [`regs::Host`] over the link, with a run's bounds.
struct LinkHost<'a, S> {
    link: &'a mut Link<S>,
    deadline: Option<(Instant, Duration)>,
    max_polls: Option<u64>,
    interval: Duration,
}

impl<'a, S> LinkHost<'a, S> {
    fn unbounded(link: &'a mut Link<S>) -> Self {
        LinkHost {
            link,
            deadline: None,
            max_polls: None,
            interval: Duration::ZERO,
        }
    }
}

impl<S: Read + Write> regs::Host for LinkHost<'_, S> {
    type Error = Stop;
    fn read_reg(&mut self, offset: u32) -> Result<u32, Stop> {
        let mut v = [0];
        self.read_regs(offset, &mut v)?;
        Ok(v[0])
    }
    fn read_regs(&mut self, offset: u32, out: &mut [u32]) -> Result<(), Stop> {
        let v = self
            .link
            .read(CONTROL_BASE + offset, out.len())
            .map_err(Stop::Link)?;
        out.copy_from_slice(&v);
        Ok(())
    }
    fn write_reg(&mut self, offset: u32, value: u32) -> Result<(), Stop> {
        self.link
            .write(CONTROL_BASE + offset, &[value], Repeat::Never)
            .map_err(Stop::Link)
    }
    fn poll_wait(&mut self, polls: u64) -> Result<(), Stop> {
        if let Some((at, limit)) = self.deadline {
            if Instant::now() >= at {
                return Err(Stop::Wall(limit));
            }
        }
        if self.max_polls.is_some_and(|m| polls >= m) {
            return Err(Stop::Polls(polls));
        }
        if !self.interval.is_zero() {
            std::thread::sleep(self.interval);
        }
        Ok(())
    }
}

/// `[offset, offset + len)` widened to whole words: the first word's address and the count.
fn word_span(addr: u64, len: usize) -> (u64, usize) {
    let start = addr & !3;
    let end = (addr + len as u64).next_multiple_of(4);
    (start, ((end - start) / 4) as usize)
}

impl<S: Read + Write> Device for SerialDevice<S> {
    fn name(&self) -> &str {
        &self.opts.backend
    }

    fn config(&self) -> &HwConfig {
        &self.cfg
    }

    fn alloc(&mut self, size: u64, align: u64) -> Result<Buffer, DeviceError> {
        self.alloc.alloc(size, align)
    }

    fn free(&mut self, buf: Buffer) -> Result<(), DeviceError> {
        self.alloc.free(&buf)
    }

    fn copy_to_device(
        &mut self,
        buf: &Buffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        let addr = self
            .alloc
            .access("copy to device", buf, offset, data.len() as u64)?;
        if data.is_empty() {
            return Ok(());
        }
        self.overwritten(addr, addr + data.len() as u64);
        let (start, n) = word_span(addr, data.len());
        let head = (addr - start) as usize;
        let mut bytes = vec![0u8; 4 * n];
        // Words only partly covered keep their other bytes: read them first.
        let partial_first = head != 0 || data.len() < 4;
        let partial_last = (head + data.len()) & 3 != 0;
        if partial_first {
            let w = self
                .link
                .read(start as u32, 1)
                .map_err(|e| self.link_error(e))?;
            bytes[..4].copy_from_slice(&w[0].to_le_bytes());
        }
        if partial_last && (n > 1 || !partial_first) {
            let at = start + 4 * (n as u64 - 1);
            let w = self
                .link
                .read(at as u32, 1)
                .map_err(|e| self.link_error(e))?;
            bytes[4 * (n - 1)..].copy_from_slice(&w[0].to_le_bytes());
        }
        bytes[head..head + data.len()].copy_from_slice(data);
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
            .collect();
        self.link
            .write(start as u32, &words, Repeat::Safe)
            .map_err(|e| self.link_error(e))
    }

    fn copy_from_device(
        &mut self,
        buf: &Buffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), DeviceError> {
        let addr = self
            .alloc
            .access("copy from device", buf, offset, out.len() as u64)?;
        if out.is_empty() {
            return Ok(());
        }
        let (start, n) = word_span(addr, out.len());
        let words = self
            .link
            .read(start as u32, n)
            .map_err(|e| self.link_error(e))?;
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let head = (addr - start) as usize;
        out.copy_from_slice(&bytes[head..head + out.len()]);
        Ok(())
    }

    fn flush(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        // The device memory has no cache in front of it.
        self.alloc.access("flush", buf, offset, size).map(drop)
    }

    fn invalidate(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        self.alloc.access("invalidate", buf, offset, size).map(drop)
    }

    fn run(
        &mut self,
        insn_addr: u64,
        insn_count: u32,
        timeout: RunTimeout,
    ) -> Result<RunReport, DeviceError> {
        let t = Instant::now();
        let wall = timeout.wall.unwrap_or(self.opts.default_wall);
        let stream = self.known_stream(insn_addr, insn_count)?;
        let (counters, stores) = {
            let k = &self.known[stream];
            (k.counters, k.stores.clone())
        };
        let addr = u32::try_from(insn_addr).expect("inside the 32-bit device memory");
        self.wait_idle(t, wall)?;
        let before = self.link.stats();
        let mut host = LinkHost {
            link: &mut self.link,
            deadline: Some((t + wall, wall)),
            max_polls: timeout.work.or(self.opts.default_polls),
            interval: self.opts.poll_interval,
        };
        let done = regs::run(&mut host, addr, insn_count);
        // Whatever happened, the run may have stored into DRAM.
        for (s, e) in stores {
            self.overwritten(s, e);
        }
        let done = match done {
            Ok(done) => done,
            Err(Stop::Link(e)) => return Err(self.link_error(e)),
            Err(Stop::Wall(d)) => {
                return Err(self.timeout(format!("no DONE within {d:?}; {NO_RESET}")))
            }
            Err(Stop::Polls(n)) => {
                return Err(self.timeout(format!("no DONE after {n} polls of CONTROL; {NO_RESET}")))
            }
        };
        let stats = self.link.stats();
        let mut report =
            crate::completion::report(&self.opts.backend, &counters, &done, insn_count)?;
        report
            .extras
            .push(("link_frames".into(), stats.frames - before.frames));
        report
            .extras
            .push(("link_repeats".into(), stats.repeats - before.repeats));
        report.wall_time = t.elapsed();
        Ok(report)
    }
}
