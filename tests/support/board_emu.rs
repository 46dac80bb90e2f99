//! An emulated Zynq board for `drivers::board::BoardDevice`: a temporary directory laid out
//! like `/dev` and `/sys`, whose files a thread of the test services with the functional
//! simulator or, as [`Engine::Rtl`], with the accelerator's Verilog in Verilator (the RTL
//! backend's harness: the register writes drive its AXI4-Lite sequence and its AXI master
//! reads and writes the DRAM the syncs fill).
//!
//! * **Registers**: `dev/uio0` is a one-page file the device maps `MAP_SHARED`; the emulator
//!   maps it too. VERSION and the ISA hash are written at start (the hash is configurable,
//!   to emulate a wrong bitstream). When CONTROL shows START, the emulator reads INSN_ADDR and
//!   INSN_COUNT, runs the stream with `vta_sim::Fsim` on its own DRAM, and after a
//!   configurable delay (or never: a hung accelerator) writes the counters, then DONE (and
//!   ERROR if the simulator failed) — CONTROL last, as the hardware's counters are stable
//!   before DONE rises.
//! * **A write-back cache**: `dev/udmabuf0` is the CPU's view of the DMA memory (what it has
//!   in its caches); the emulator's DRAM is a separate array. Only the u-dma-buf sync files
//!   move data between them: `sync_for_device` copies the synced range CPU view -> DRAM
//!   (clean), `sync_for_cpu` copies DRAM -> CPU view (invalidate). A forgotten flush leaves
//!   the accelerator reading stale DRAM; a forgotten invalidate leaves the CPU reading its
//!   stale view.
//! * **Ordering**: `sync_for_device`, `sync_for_cpu` and `sync_owner` are FIFOs, which the
//!   emulator holds open read-write (so the device's opens never block and no reader sees
//!   end-of-file). The device writes `1` to a sync FIFO and then reads `sync_owner`, as it
//!   does on a real board to confirm the sync; the emulator copies the range first and only
//!   then answers in `sync_owner`, so the device's read returns after the copy: every sync is
//!   complete before the device's next register write, as the kernel's is. `sync_offset`,
//!   `sync_size` and `sync_direction` are plain files written before the command.

#![allow(dead_code)]

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use drivers::board::{BoardOptions, BoardPaths, RegisterWindow};
use drivers::regs;
use drivers::{Buffer, Device, RunTimeout, PAGE_SIZE};
use isa::HwConfig;
use vta_sim::rtl::{RtlDevice, RtlOptions};
use vta_sim::{Dram, Fsim, Limits};

/// Physical address of the emulated u-dma-buf (below 4 GiB, as on a Zynq-7000).
pub const PHYS: u64 = 0x1800_0000;

/// What executes the emulated accelerator's runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The functional simulator (fast; CYCLES counts instructions and micro-ops).
    Fsim,
    /// The cycle-accurate RTL simulator (real cycle counts).
    Rtl,
}

/// How the emulated accelerator finishes a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// DONE this long after START.
    After(Duration),
    /// Never (a hung accelerator; only [`EmulatedBoard::reload`] clears it).
    Never,
}

struct Shared {
    finish: Finish,
    /// A bitstream reload was asked for with this ISA hash.
    reload: Option<u64>,
    /// Sync commands served, in order: ("device" | "cpu", offset, size).
    syncs: Vec<(&'static str, u64, u64)>,
}

/// A started run: when it finishes (`None`: never) and the registers (offset, value) it
/// ends with.
type StartedRun = (Option<Instant>, Vec<(u32, u32)>);

pub struct EmulatedBoard {
    pub dir: tempfile::TempDir,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EmulatedBoard {
    /// A board whose accelerator implements `cfg` but reports `isa_hash`, with `size` bytes of
    /// DMA memory at [`PHYS`].
    pub fn new(cfg: &HwConfig, isa_hash: u64, size: u64) -> EmulatedBoard {
        Self::with_engine(cfg, isa_hash, size, Engine::Fsim)
    }

    /// [`EmulatedBoard::new`] whose runs `engine` executes.
    pub fn with_engine(cfg: &HwConfig, isa_hash: u64, size: u64, engine: Engine) -> EmulatedBoard {
        let dir = tempfile::tempdir().unwrap();
        let paths = BoardPaths::under(dir.path());
        for d in [&paths.dev, &paths.firmware, &udmabuf_sys(&paths)] {
            fs::create_dir_all(d).unwrap();
        }
        File::create(paths.dev.join("uio0"))
            .unwrap()
            .set_len(4096)
            .unwrap();
        File::create(paths.dev.join("udmabuf0"))
            .unwrap()
            .set_len(size)
            .unwrap();
        let sys = udmabuf_sys(&paths);
        fs::write(sys.join("phys_addr"), format!("0x{PHYS:08x}\n")).unwrap();
        fs::write(sys.join("size"), format!("{size}\n")).unwrap();
        for f in ["sync_offset", "sync_size", "sync_direction"] {
            fs::write(sys.join(f), "0\n").unwrap();
        }
        for f in ["sync_for_device", "sync_for_cpu", "sync_owner"] {
            let c = CString::new(sys.join(f).as_os_str().as_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {f}");
        }
        let shared = Arc::new(Mutex::new(Shared {
            finish: Finish::After(Duration::ZERO),
            reload: None,
            syncs: vec![],
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let emu = Emulator::new(cfg, &paths, size, isa_hash);
        let cfg = cfg.clone();
        let thread = {
            let (shared, stop) = (shared.clone(), stop.clone());
            Some(std::thread::spawn(move || {
                emu.serve(&shared, &stop, engine, &cfg)
            }))
        };
        EmulatedBoard {
            dir,
            shared,
            stop,
            thread,
        }
    }

    /// Options that open a `BoardDevice` on this board.
    pub fn options(&self) -> BoardOptions {
        BoardOptions {
            paths: BoardPaths::under(self.dir.path()),
            registers: RegisterWindow::Uio(0),
            udmabuf: "udmabuf0".into(),
            poll_interval: Duration::from_micros(50),
            default_wall: Duration::from_secs(60),
        }
    }

    pub fn set_finish(&self, f: Finish) {
        self.shared.lock().unwrap().finish = f;
    }

    /// Emulates loading a bitstream whose accelerator reports `isa_hash`: the fabric is
    /// reset (a hung run ends, CONTROL clears).
    pub fn reload(&self, isa_hash: u64) {
        self.shared.lock().unwrap().reload = Some(isa_hash);
        while self.shared.lock().unwrap().reload.is_some() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The sync commands served so far.
    pub fn syncs(&self) -> Vec<(&'static str, u64, u64)> {
        self.shared.lock().unwrap().syncs.clone()
    }
}

impl Drop for EmulatedBoard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let r = t.join();
            if !std::thread::panicking() {
                r.expect("the emulator thread panicked");
            }
        }
    }
}

fn udmabuf_sys(p: &BoardPaths) -> PathBuf {
    p.sys.join("class/u-dma-buf/udmabuf0")
}

/// A `MAP_SHARED` mapping of a whole file.
struct Map {
    ptr: *mut u8,
    len: usize,
}

unsafe impl Send for Map {}

impl Map {
    fn new(path: &Path, len: usize) -> Map {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        // SAFETY: a fresh shared mapping of an open file of at least `len` bytes.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        Map {
            ptr: ptr.cast(),
            len,
        }
    }

    fn reg(&self, offset: u32) -> &AtomicU32 {
        assert!((offset as usize) + 4 <= self.len);
        // SAFETY: aligned, in bounds, and only ever accessed as 32-bit words by both sides.
        unsafe { &*(self.ptr.add(offset as usize) as *const AtomicU32) }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmapping what new mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

struct Emulator {
    sim: Fsim,
    dram: Dram,
    cpu_view: Map,
    regs: Map,
    sys: PathBuf,
    to_device: File,
    to_cpu: File,
    owner: File,
}

fn fifo(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .unwrap()
}

fn read_num(path: &Path) -> u64 {
    fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

impl Emulator {
    fn new(cfg: &HwConfig, paths: &BoardPaths, size: u64, isa_hash: u64) -> Emulator {
        let sys = udmabuf_sys(paths);
        let e = Emulator {
            sim: Fsim::new(cfg),
            dram: Dram::new(PHYS, size as usize),
            cpu_view: Map::new(&paths.dev.join("udmabuf0"), size as usize),
            regs: Map::new(&paths.dev.join("uio0"), 4096),
            to_device: fifo(&sys.join("sync_for_device")),
            to_cpu: fifo(&sys.join("sync_for_cpu")),
            owner: fifo(&sys.join("sync_owner")),
            sys,
        };
        e.identify(isa_hash);
        e
    }

    fn identify(&self, isa_hash: u64) {
        self.regs
            .reg(regs::VERSION)
            .store(regs::VERSION_VALUE, Ordering::SeqCst);
        self.regs
            .reg(regs::ISA_HASH_LO)
            .store(isa_hash as u32, Ordering::SeqCst);
        self.regs
            .reg(regs::ISA_HASH_HI)
            .store((isa_hash >> 32) as u32, Ordering::SeqCst);
        self.regs.reg(regs::CONTROL).store(0, Ordering::SeqCst);
    }

    fn serve(mut self, shared: &Mutex<Shared>, stop: &AtomicBool, engine: Engine, cfg: &HwConfig) {
        // The RTL device is built here, on the thread that uses it (it is not `Send`), with
        // its memory at the u-dma-buf's physical address, all of it one buffer.
        let mut rtl = (engine == Engine::Rtl).then(|| {
            let opts = RtlOptions {
                cache_dir: Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vta-hw-models")),
                mem_base: PHYS,
                mem_size: self.dram.size(),
                ..RtlOptions::default()
            };
            let mut dev =
                RtlDevice::with_options(cfg, &opts, &mut |s| eprintln!("[rtl model] {s}"))
                    .expect("the RTL model builds");
            let buf = dev.alloc(self.dram.size(), PAGE_SIZE).unwrap();
            assert_eq!(buf.phys_addr, PHYS, "the whole RTL memory is the u-dma-buf");
            (dev, buf)
        });
        let mut running: Option<StartedRun> = None;
        while !stop.load(Ordering::SeqCst) {
            let mut fds = [
                libc::pollfd {
                    fd: self.to_device.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.to_cpu.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds.
            unsafe { libc::poll(fds.as_mut_ptr(), 2, 1) };
            if fds[0].revents & libc::POLLIN != 0 {
                self.sync(true, shared, rtl.as_mut());
            }
            if fds[1].revents & libc::POLLIN != 0 {
                self.sync(false, shared, rtl.as_mut());
            }
            if let Some(hash) = shared.lock().unwrap().reload.take() {
                running = None;
                self.identify(hash);
            }
            let control = self.regs.reg(regs::CONTROL);
            match &running {
                None if control.load(Ordering::SeqCst) & regs::CONTROL_START != 0 => {
                    control.store(regs::CONTROL_RUNNING, Ordering::SeqCst);
                    let due = match shared.lock().unwrap().finish {
                        Finish::After(d) => Some(Instant::now() + d),
                        Finish::Never => None,
                    };
                    running = Some((due, self.execute(rtl.as_mut())));
                }
                Some((Some(due), end)) if Instant::now() >= *due => {
                    for &(r, v) in end {
                        self.regs.reg(r).store(v, Ordering::SeqCst);
                    }
                    running = None;
                }
                _ => {}
            }
        }
    }

    /// Serves one sync command: copies the range, then acknowledges in `sync_owner`.
    fn sync(
        &mut self,
        for_device: bool,
        shared: &Mutex<Shared>,
        rtl: Option<&mut (RtlDevice, Buffer)>,
    ) {
        let mut cmd = [0u8; 16];
        let src = if for_device {
            &mut self.to_device
        } else {
            &mut self.to_cpu
        };
        let n = src.read(&mut cmd).unwrap();
        assert_eq!(&cmd[..n], b"1", "sync command");
        let off = read_num(&self.sys.join("sync_offset"));
        let size = read_num(&self.sys.join("sync_size"));
        let dir = read_num(&self.sys.join("sync_direction"));
        assert!(off + size <= self.dram.size(), "sync range past the buffer");
        let dram = &mut self.dram.bytes_mut()[off as usize..(off + size) as usize];
        // SAFETY: in bounds of the CPU view (checked against the same size).
        let view = unsafe {
            std::slice::from_raw_parts_mut(self.cpu_view.ptr.add(off as usize), size as usize)
        };
        // DMA_BIDIRECTIONAL (0) cleans and invalidates; TO_DEVICE (1) only cleans and
        // FROM_DEVICE (2) only invalidates, as on ARM.
        match rtl {
            Some((dev, buf)) => {
                if for_device && dir != 2 {
                    dev.copy_to_device(buf, off, view).unwrap();
                }
                if !for_device && dir != 1 {
                    dev.copy_from_device(buf, off, view).unwrap();
                }
            }
            None => {
                if for_device && dir != 2 {
                    dram.copy_from_slice(view);
                }
                if !for_device && dir != 1 {
                    view.copy_from_slice(dram);
                }
            }
        }
        shared
            .lock()
            .unwrap()
            .syncs
            .push((if for_device { "device" } else { "cpu" }, off, size));
        let ack: &[u8] = if for_device { b"1\n" } else { b"0\n" };
        self.owner.write_all(ack).unwrap();
    }

    /// Runs the stream in the registers on DRAM; returns the registers the run ends with,
    /// CONTROL last.
    fn execute(&mut self, rtl: Option<&mut (RtlDevice, Buffer)>) -> Vec<(u32, u32)> {
        let addr = self.regs.reg(regs::INSN_ADDR).load(Ordering::SeqCst);
        let count = self.regs.reg(regs::INSN_COUNT).load(Ordering::SeqCst);
        if let Some((dev, _)) = rtl {
            return match dev.run(u64::from(addr), count, RunTimeout::default()) {
                Ok(r) => {
                    let get = |n: &str| r.get(n).unwrap_or(0) as u32;
                    vec![
                        (regs::CYCLES, get("cycles")),
                        (regs::GEMM_UOPS, get("gemm_uops")),
                        (regs::ALU_UOPS, get("alu_uops")),
                        (regs::RESET_UOPS, get("reset_uops")),
                        (regs::INSNS, count),
                        (regs::CONTROL, regs::CONTROL_DONE),
                    ]
                }
                Err(_) => vec![(regs::CONTROL, regs::CONTROL_DONE | regs::CONTROL_ERROR)],
            };
        }
        let r = self.sim.run(
            &mut self.dram,
            u64::from(addr),
            count,
            &Limits::steps(Limits::DEFAULT_MAX_STEPS),
        );
        match r {
            Ok(c) => vec![
                // Not a cycle count: the emulator has no clock; instructions + micro-ops.
                (
                    regs::CYCLES,
                    (c.insns() + c.gemm_uops + c.alu_uops + c.reset_uops) as u32,
                ),
                (regs::GEMM_UOPS, c.gemm_uops as u32),
                (regs::ALU_UOPS, c.alu_uops as u32),
                (regs::RESET_UOPS, c.reset_uops as u32),
                (regs::INSNS, count),
                (regs::CONTROL, regs::CONTROL_DONE),
            ],
            Err(_) => vec![(regs::CONTROL, regs::CONTROL_DONE | regs::CONTROL_ERROR)],
        }
    }
}
