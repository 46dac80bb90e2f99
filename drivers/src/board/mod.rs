//! The board device: the accelerator in a Zynq's fabric behind [`Device`], on Linux, with
//! std and `libc` only.
//!
//! * **Registers**: the AXI4-Lite window mapped from a UIO device (`/dev/uioN`, map 0) or from
//!   `/dev/mem` at the base address the bitstream's `.hwh`/manifest gives
//!   ([`RegisterWindow`]), read and written as 32-bit volatile words; the run sequence is
//!   [`regs::run`], the same code the RTL simulator drives.
//! * **Memory**: one u-dma-buf buffer ([`udmabuf`]; physically contiguous, mapped cached)
//!   carved up by the shared [`Allocator`]. [`Device::flush`] is u-dma-buf's `sync_for_device`
//!   and [`Device::invalidate`] its `sync_for_cpu`, over exactly the range asked for. The
//!   accelerator's addresses are 32 bits (INSN_ADDR, the AXI master), so the buffer must lie
//!   below 4 GiB (always so on Zynq-7000; on ZU+ reserve it low).
//! * **Bitstreams** ([`bitstream`]): the kernel's FPGA manager, and the fabric clock
//!   ([`clock`]).
//! * **Identity**: opening checks VERSION and the ISA hash ([`regs::check_identity`]); a wrong
//!   or stale bitstream is refused with both hashes and how to fix it.
//! * **Runs**: polled with a wall-clock deadline ([`RunTimeout::wall`], default
//!   [`BoardOptions::default_wall`]) and a bound on polls ([`RunTimeout::work`]). The
//!   accelerator has no reset register: a run that times out may still be running. The device
//!   stays usable: the next run first waits (within its own deadline) for the accelerator to
//!   leave RUNNING; if it never does, only reloading the bitstream resets it, and the error
//!   says so. The counters of a completed run are the instruction stream's
//!   ([`Counters::of_stream`]), checked against the hardware's micro-op and instruction
//!   counters as the RTL backend does, and `extras` carry `cycles`, the per-module busy and
//!   stall counters and `polls`.
//!
//! Every path (device files, sysfs, firmware) comes from [`BoardPaths`], so the tests run
//! the device against an emulated board in a temporary directory.

pub mod bitstream;
pub mod clock;
mod mmio;
pub mod udmabuf;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use isa::{Codec, HwConfig, INSN_BYTES};

use crate::{regs, Allocator, Buffer, Counters, Device, DeviceError, RunReport, RunTimeout};
use mmio::Mapping;
use udmabuf::UDmaBuf;

/// Where the board's device files, sysfs and firmware live (the defaults are Linux's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardPaths {
    /// Device files: `uioN`, `mem`, `udmabufN`.
    pub dev: PathBuf,
    /// sysfs: `class/u-dma-buf`, `class/fpga_manager`, `class/uio`.
    pub sys: PathBuf,
    /// Where the FPGA manager looks for firmware.
    pub firmware: PathBuf,
    /// The Zynq-7000 devcfg directory with `fclk_export` and `fclk/`.
    pub fclk: PathBuf,
}

impl Default for BoardPaths {
    fn default() -> Self {
        BoardPaths {
            dev: "/dev".into(),
            sys: "/sys".into(),
            firmware: "/lib/firmware".into(),
            fclk: "/sys/devices/soc0/amba/f8007000.devcfg".into(),
        }
    }
}

impl BoardPaths {
    /// Every path under `root` (`root/dev`, `root/sys`, ...): for tests and chroots.
    pub fn under(root: &Path) -> BoardPaths {
        let d = BoardPaths::default();
        let re = |p: &Path| root.join(p.strip_prefix("/").expect("absolute default"));
        BoardPaths {
            dev: re(&d.dev),
            sys: re(&d.sys),
            firmware: re(&d.firmware),
            fclk: re(&d.fclk),
        }
    }

    /// The board's own paths for `/`, else every path under `root` ([`BoardPaths::under`]):
    /// what a `root` option of the board binary and the Python package means.
    pub fn at(root: &Path) -> BoardPaths {
        if root == Path::new("/") {
            BoardPaths::default()
        } else {
            BoardPaths::under(root)
        }
    }

    /// The FPGA manager's sysfs directory.
    pub fn fpga_manager(&self) -> PathBuf {
        self.sys.join("class/fpga_manager/fpga0")
    }
}

/// Where the accelerator's registers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterWindow {
    /// `/dev/uioN`, map 0 (a `generic-uio` device tree node for the accelerator).
    Uio(u32),
    /// `/dev/mem` at this physical base address (from the `.hwh` or the manifest; page
    /// aligned). In a bitstream of several cores each core has its own window, so this base
    /// picks the core (`vta-board --core K` takes core K's from the `.hwh`).
    DevMem(u64),
}

/// How to open a [`BoardDevice`].
#[derive(Debug, Clone)]
pub struct BoardOptions {
    pub paths: BoardPaths,
    pub registers: RegisterWindow,
    /// The u-dma-buf buffer, e.g. `udmabuf0`.
    pub udmabuf: String,
    /// Sleep between two polls of CONTROL (0: yield only).
    pub poll_interval: Duration,
    /// Wall-clock bound of a run when [`RunTimeout::wall`] is not given.
    pub default_wall: Duration,
}

impl Default for BoardOptions {
    fn default() -> Self {
        BoardOptions {
            paths: BoardPaths::default(),
            registers: RegisterWindow::Uio(0),
            udmabuf: "udmabuf0".into(),
            poll_interval: Duration::from_micros(10),
            default_wall: Duration::from_secs(10),
        }
    }
}

/// What can go wrong on a board, named with the file involved and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "no u-dma-buf buffer '{name}' ({} missing): load the module with a buffer, e.g. \
         `insmod u-dma-buf.ko udmabuf0=67108864` (64 MiB)",
        sys.display()
    )]
    NoUDmaBuf { sys: PathBuf, name: String },
    #[error("{detail}")]
    Address { detail: String },
    #[error(
        "{command} of [{offset}, +{size}) was not acknowledged: sync_owner reads '{owner}' \
         under {} (is the range inside the buffer, and the module u-dma-buf ≥ 3?)",
        sys.display()
    )]
    Sync {
        command: String,
        offset: u64,
        size: u64,
        owner: String,
        sys: PathBuf,
    },
    #[error("{file}: {detail}")]
    Bitstream { file: String, detail: String },
    #[error(
        "the FPGA manager did not load {}: {}/state reads '{state}' (expected 'operating'); \
         check dmesg, and that the .bit was built for this board's part",
        firmware.display(), manager.display()
    )]
    FpgaState {
        state: String,
        firmware: PathBuf,
        manager: PathBuf,
    },
    #[error("fabric clock: {detail}")]
    Clock { detail: String },
    #[error(
        "the loaded bitstream does not match: {detail}. Load the bitstream built for this \
         config (`vta hw bitstream --config ...` on the workstation, then `vta-board load \
         FILE.bit`), or run with the config the bitstream was built for"
    )]
    Identity { detail: String },
}

pub(crate) fn io_err(what: &'static str, path: &Path, source: std::io::Error) -> BoardError {
    BoardError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

fn unavailable(e: BoardError) -> DeviceError {
    DeviceError::Unavailable {
        backend: "board".into(),
        source: Box::new(e),
    }
}

/// The accelerator on a board (see the module docs).
pub struct BoardDevice {
    cfg: HwConfig,
    regs: Mapping,
    mem: UDmaBuf,
    alloc: Allocator,
    opts: BoardOptions,
}

impl BoardDevice {
    /// Opens the register window and the DMA buffer and checks the accelerator's identity
    /// against `cfg`.
    pub fn open(cfg: &HwConfig, opts: &BoardOptions) -> Result<BoardDevice, BoardError> {
        let page = mmio::page_size();
        let regs = match opts.registers {
            RegisterWindow::Uio(n) => Mapping::open(
                &opts.paths.dev.join(format!("uio{n}")),
                0,
                page as usize,
                true,
            )?,
            RegisterWindow::DevMem(base) => {
                if base % page != 0 {
                    return Err(BoardError::Address {
                        detail: format!(
                            "register base {base:#x} is not page aligned; take it from the \
                             .hwh (BASEVALUE of s_axi_control)"
                        ),
                    });
                }
                Mapping::open(&opts.paths.dev.join("mem"), base, page as usize, true)?
            }
        };
        let mem = UDmaBuf::open(&opts.paths, &opts.udmabuf)?;
        let (phys, size) = (mem.phys_addr(), mem.size() / page * page);
        if phys % page != 0 || phys.checked_add(size).is_none_or(|end| end > 1 << 32) {
            return Err(BoardError::Address {
                detail: format!(
                    "u-dma-buf {} at {phys:#x} (+{size:#x}) is not page aligned below 4 GiB; \
                     the accelerator has 32-bit addresses (on ZU+, reserve the buffer's \
                     memory low, e.g. a reserved-memory region below 0x8000_0000)",
                    opts.udmabuf
                ),
            });
        }
        let mut dev = BoardDevice {
            cfg: cfg.clone(),
            regs,
            mem,
            alloc: Allocator::new(phys, size, page.max(crate::PAGE_SIZE)),
            opts: opts.clone(),
        };
        dev.check_identity()?;
        Ok(dev)
    }

    /// Loads `bit` through the FPGA manager (setting FCLK0 to the config's clock on `ps`)
    /// and opens the device on it.
    pub fn load_and_open(
        cfg: &HwConfig,
        opts: &BoardOptions,
        bit: &[u8],
        what: &str,
        ps: clock::Ps,
    ) -> Result<BoardDevice, BoardError> {
        bitstream::load(&opts.paths, bit, what, "vta")?;
        clock::set_fclk0(&opts.paths, ps, cfg.clock_mhz)?;
        BoardDevice::open(cfg, opts)
    }

    /// Checks VERSION and the ISA hash against the config.
    pub fn check_identity(&mut self) -> Result<(), BoardError> {
        let mut host = Poller::unbounded(&mut self.regs);
        match regs::check_identity(&mut host, &self.cfg) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(detail)) => Err(BoardError::Identity { detail }),
            // check_identity only reads registers; it never polls, so never stops.
            Err(stop) => unreachable!("identity check stopped polling: {stop:?}"),
        }
    }

    /// The allocator, to inspect free space.
    pub fn allocator(&self) -> &Allocator {
        &self.alloc
    }

    /// The instruction stream at `insn_addr` as the CPU wrote it, decoded.
    fn stream_counters(&self, insn_addr: u64, count: u32) -> Result<Counters, DeviceError> {
        let len = u64::from(count) * INSN_BYTES as u64;
        let start = insn_addr.checked_sub(self.mem.phys_addr());
        let off = start
            .filter(|&o| o.checked_add(len).is_some_and(|e| e <= self.mem.size()))
            .ok_or_else(|| {
                DeviceError::Program(format!(
                    "{count} instructions at {insn_addr:#x} are outside the DMA buffer \
                     [{:#x}, +{:#x})",
                    self.mem.phys_addr(),
                    self.mem.size()
                ))
            })?;
        let mut bytes = vec![0; len as usize];
        self.mem.read(off, &mut bytes);
        let insns = Codec::new(&self.cfg)
            .decode_stream(&bytes)
            .map_err(|e| DeviceError::Program(e.to_string()))?;
        Ok(Counters::of_stream(&self.cfg, &insns))
    }

    fn timeout(&self, detail: String) -> DeviceError {
        DeviceError::Timeout {
            backend: self.name().into(),
            detail,
        }
    }
}

/// Why polling stopped.
#[derive(Debug)]
enum Stop {
    Wall(Duration),
    Polls(u64),
}

/// [`regs::Host`] over the register window, with the run's bounds.
struct Poller<'a> {
    regs: &'a mut Mapping,
    deadline: Option<(Instant, Duration)>,
    max_polls: Option<u64>,
    interval: Duration,
}

impl<'a> Poller<'a> {
    fn unbounded(regs: &'a mut Mapping) -> Self {
        Poller {
            regs,
            deadline: None,
            max_polls: None,
            interval: Duration::ZERO,
        }
    }
}

impl regs::Host for Poller<'_> {
    type Error = Stop;
    fn read_reg(&mut self, offset: u32) -> Result<u32, Stop> {
        Ok(self.regs.read32(offset as usize))
    }
    fn write_reg(&mut self, offset: u32, value: u32) -> Result<(), Stop> {
        self.regs.write32(offset as usize, value);
        Ok(())
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
        if self.interval.is_zero() {
            std::thread::yield_now();
        } else {
            std::thread::sleep(self.interval);
        }
        Ok(())
    }
}

/// What the error of a timed-out run says about the accelerator.
const NO_RESET: &str = "the accelerator has no reset register, so it may still be running \
                        that stream: the next run waits for it to finish; if it never does, \
                        reload the bitstream (`vta-board load FILE.bit`) to reset the fabric";

impl Device for BoardDevice {
    fn name(&self) -> &str {
        "board"
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
        self.mem.write(addr - self.mem.phys_addr(), data);
        Ok(())
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
        self.mem.read(addr - self.mem.phys_addr(), out);
        Ok(())
    }

    fn flush(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        let addr = self.alloc.access("flush", buf, offset, size)?;
        self.mem
            .sync_for_device(addr - self.mem.phys_addr(), size)
            .map_err(unavailable)
    }

    fn invalidate(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        let addr = self.alloc.access("invalidate", buf, offset, size)?;
        self.mem
            .sync_for_cpu(addr - self.mem.phys_addr(), size)
            .map_err(unavailable)
    }

    fn run(
        &mut self,
        insn_addr: u64,
        insn_count: u32,
        timeout: RunTimeout,
    ) -> Result<RunReport, DeviceError> {
        let t = Instant::now();
        let wall = timeout.wall.unwrap_or(self.opts.default_wall);
        let counters = self.stream_counters(insn_addr, insn_count)?;
        let addr = u32::try_from(insn_addr).map_err(|_| {
            DeviceError::Program(format!("instruction address {insn_addr:#x} is past 4 GiB"))
        })?;
        // An earlier run that timed out may still be going: START is ignored while RUNNING.
        while self.regs.read32(regs::CONTROL as usize) & regs::CONTROL_RUNNING != 0 {
            if t.elapsed() >= wall {
                return Err(self.timeout(format!(
                    "the accelerator is still running an earlier run that timed out, after \
                     waiting {wall:?}; {NO_RESET}"
                )));
            }
            std::thread::sleep(self.opts.poll_interval.max(Duration::from_micros(100)));
        }
        let mut host = Poller {
            regs: &mut self.regs,
            deadline: Some((t + wall, wall)),
            max_polls: timeout.work,
            interval: self.opts.poll_interval,
        };
        let done = match regs::run(&mut host, addr, insn_count) {
            Ok(done) => done,
            Err(stop) => {
                let what = match stop {
                    Stop::Wall(d) => format!("no DONE within {d:?}"),
                    Stop::Polls(n) => format!("no DONE after {n} polls of CONTROL"),
                };
                return Err(self.timeout(format!("{what}; {NO_RESET}")));
            }
        };
        let mut report = crate::completion::report(self.name(), &counters, &done, insn_count)?;
        report.wall_time = t.elapsed();
        Ok(report)
    }
}
