//! The register map of the AXI4-Lite control port `s_axi_control`: 32-bit registers at
//! byte offsets, as Rust constants, and the host's register sequence. It lives in the device
//! HAL so that a board binary, which links this crate and not the HDL, reaches it;
//! `vta_hw::regs` re-exports it and adds the map as JSON for the bitstream's manifest.
//!
//! Host sequence for one run: write [`INSN_ADDR`] (byte address of the first 128-bit
//! instruction, 16-byte aligned) and [`INSN_COUNT`], write [`CONTROL_START`] to [`CONTROL`],
//! then poll [`CONTROL`] until [`CONTROL_DONE`] is set (with a bound of the host's choice),
//! and read the counters. All counters restart from zero at every start and stop counting
//! when the run is done; each wraps at 2^32.
//!
//! Check [`VERSION`] against [`VERSION_VALUE`] and [`ISA_HASH_LO`]/[`ISA_HASH_HI`] against
//! `HwConfig::isa_hash()` before running a program on a bitstream.
//!
//! The sequence is code, once: [`run`] and [`check_identity`] drive any [`Host`] (register
//! reads and writes, and a wait between two polls). The cycle-accurate simulator
//! (`vta_sim::rtl::accelerator::Accelerator`) implements it with AXI4-Lite transactions on
//! the Verilated model; the board device (`board::BoardDevice`, Linux) implements it with
//! memory-mapped I/O, so both run programs exactly the same way.

/// Width of the control port's byte addresses.
pub const ADDR_BITS: u32 = 8;

/// CONTROL: write [`CONTROL_START`] to start a run (ignored while one is running); read
/// [`CONTROL_RUNNING`], [`CONTROL_DONE`] (sticky until the next start) and [`CONTROL_ERROR`].
pub const CONTROL: u32 = 0x00;
/// VERSION: reads [`VERSION_VALUE`].
pub const VERSION: u32 = 0x04;
/// INSN_ADDR: byte address of the instruction stream (read/write).
pub const INSN_ADDR: u32 = 0x08;
/// INSN_COUNT: number of 128-bit instructions to run (read/write).
pub const INSN_COUNT: u32 = 0x0c;
/// ISA_HASH_LO: low 32 bits of the config's `isa_hash()`.
pub const ISA_HASH_LO: u32 = 0x10;
/// ISA_HASH_HI: high 32 bits of the config's `isa_hash()`.
pub const ISA_HASH_HI: u32 = 0x14;
/// CYCLES: clock cycles from start to done.
pub const CYCLES: u32 = 0x18;
/// LOAD_BUSY: cycles the load module had an instruction in progress (stalls included).
pub const LOAD_BUSY: u32 = 0x1c;
/// COMPUTE_BUSY: the same for the compute module.
pub const COMPUTE_BUSY: u32 = 0x20;
/// STORE_BUSY: the same for the store module.
pub const STORE_BUSY: u32 = 0x24;
/// LOAD_STALL: cycles the load module waited on a token (pop empty or push full).
pub const LOAD_STALL: u32 = 0x28;
/// COMPUTE_STALL: the same for the compute module.
pub const COMPUTE_STALL: u32 = 0x2c;
/// STORE_STALL: the same for the store module.
pub const STORE_STALL: u32 = 0x30;
/// DMA_BUSY: cycles with a DRAM transfer requested or in flight.
pub const DMA_BUSY: u32 = 0x34;
/// GEMM_UOPS: GEMM micro-op iterations without reset (low 32 bits).
pub const GEMM_UOPS: u32 = 0x38;
/// ALU_UOPS: ALU micro-op iterations without reset (low 32 bits).
pub const ALU_UOPS: u32 = 0x3c;
/// RESET_UOPS: GEMM and ALU micro-op iterations with `reset_reg` (low 32 bits).
pub const RESET_UOPS: u32 = 0x40;
/// INSNS: instructions fetched from DRAM in this run.
pub const INSNS: u32 = 0x44;

/// CONTROL bit 0, written: start a run. Read: a run is in progress.
pub const CONTROL_START: u32 = 1 << 0;
/// CONTROL bit 0, read: a run is in progress.
pub const CONTROL_RUNNING: u32 = 1 << 0;
/// CONTROL bit 1, read: the last run retired its FINISH (sticky until the next start).
pub const CONTROL_DONE: u32 = 1 << 1;
/// CONTROL bit 2, read: since the last start, an AXI error response was seen or the
/// execution core reported a fault (a micro-op index past its buffer).
pub const CONTROL_ERROR: u32 = 1 << 2;

/// What [`VERSION`] reads: `"VTA"` in the top bytes and the register-map version (1) in the
/// low byte.
pub const VERSION_VALUE: u32 = 0x5654_4101;

/// The host's side of the control port, for [`run`] and [`check_identity`].
pub trait Host {
    /// What can go wrong (a bus error, a timeout, a simulation that stopped).
    type Error;
    /// Reads the 32-bit register at byte `offset`.
    fn read_reg(&mut self, offset: u32) -> Result<u32, Self::Error>;
    /// Writes the 32-bit register at byte `offset` (all byte lanes).
    fn write_reg(&mut self, offset: u32, value: u32) -> Result<(), Self::Error>;
    /// Reads `out.len()` consecutive registers from byte `offset` on: one [`Host::read_reg`]
    /// each, unless the host can do better (a serial link reads them in one frame).
    fn read_regs(&mut self, offset: u32, out: &mut [u32]) -> Result<(), Self::Error> {
        for (i, v) in out.iter_mut().enumerate() {
            *v = self.read_reg(offset + 4 * i as u32)?;
        }
        Ok(())
    }
    /// Called after each read of [`CONTROL`] that did not show [`CONTROL_DONE`] (`polls` of
    /// them so far): sleep, spin, or advance a simulation; an error ends the run (a
    /// timeout: the accelerator may still be running, reset it before the next run).
    fn poll_wait(&mut self, polls: u64) -> Result<(), Self::Error>;
}

/// A run that reached DONE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// [`CONTROL`] as read when DONE was seen (check [`CONTROL_ERROR`]).
    pub control: u32,
    /// Every register of the map, by name, in map order, read after DONE.
    pub registers: Vec<(&'static str, u32)>,
    /// Reads of CONTROL it took.
    pub polls: u64,
}

impl Completion {
    /// A register's value by name.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.registers.iter().find(|(n, _)| *n == name).map(|r| r.1)
    }
}

/// The run sequence: write [`INSN_ADDR`] and [`INSN_COUNT`], write [`CONTROL_START`] to
/// [`CONTROL`], poll [`CONTROL`] (with [`Host::poll_wait`] between reads) until
/// [`CONTROL_DONE`], then read every register.
pub fn run<H: Host + ?Sized>(
    host: &mut H,
    insn_addr: u32,
    insn_count: u32,
) -> Result<Completion, H::Error> {
    host.write_reg(INSN_ADDR, insn_addr)?;
    host.write_reg(INSN_COUNT, insn_count)?;
    host.write_reg(CONTROL, CONTROL_START)?;
    let mut polls = 0;
    let control = loop {
        let c = host.read_reg(CONTROL)?;
        polls += 1;
        if c & CONTROL_DONE != 0 {
            break c;
        }
        host.poll_wait(polls)?;
    };
    Ok(Completion {
        control,
        registers: read_all(host)?,
        polls,
    })
}

/// Reads every register of the map, in map order (with one [`Host::read_regs`]: the map's
/// offsets are consecutive).
pub fn read_all<H: Host + ?Sized>(host: &mut H) -> Result<Vec<(&'static str, u32)>, H::Error> {
    let mut values = [0; MAP.len()];
    host.read_regs(MAP[0].offset, &mut values)?;
    Ok(MAP.iter().map(|r| r.name).zip(values).collect())
}

/// Checks [`VERSION`] and the ISA hash against `cfg`, as a driver does before running a
/// program built for `cfg`: the inner error says what does not match.
pub fn check_identity<H: Host + ?Sized>(
    host: &mut H,
    cfg: &isa::HwConfig,
) -> Result<Result<(), String>, H::Error> {
    let v = host.read_reg(VERSION)?;
    if v != VERSION_VALUE {
        return Ok(Err(format!(
            "VERSION reads {v:#x}, expected {VERSION_VALUE:#x} (not this accelerator, or \
             another register-map version)"
        )));
    }
    let hash = host.read_reg(ISA_HASH_LO)? as u64 | (host.read_reg(ISA_HASH_HI)? as u64) << 32;
    if hash != cfg.isa_hash() {
        return Ok(Err(format!(
            "the accelerator's ISA hash is {hash:016x} but config {} has {:016x}",
            cfg.config_string(),
            cfg.isa_hash()
        )));
    }
    Ok(Ok(()))
}

/// How software may access a register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read and write.
    ReadWrite,
    /// Read only; writes are ignored.
    ReadOnly,
    /// CONTROL: writes act (start), reads return status.
    Control,
}

impl Access {
    /// `"rw"`, `"ro"` or `"control"`.
    pub fn name(self) -> &'static str {
        match self {
            Access::ReadWrite => "rw",
            Access::ReadOnly => "ro",
            Access::Control => "control",
        }
    }
}

/// One register of the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reg {
    /// Upper-case name, as in this module's constants.
    pub name: &'static str,
    /// Byte offset.
    pub offset: u32,
    /// Access kind.
    pub access: Access,
    /// One-line description.
    pub doc: &'static str,
}

/// Every register, in offset order (consecutive, from 0).
pub const MAP: &[Reg] = &[
    Reg {
        name: "CONTROL",
        offset: CONTROL,
        access: Access::Control,
        doc: "write bit 0 = start (ignored while running); read bit 0 running, bit 1 done \
              (sticky until the next start), bit 2 error since the last start (AXI error \
              response or core fault)",
    },
    Reg {
        name: "VERSION",
        offset: VERSION,
        access: Access::ReadOnly,
        doc: "0x56544101: 'VTA' and register-map version 1",
    },
    Reg {
        name: "INSN_ADDR",
        offset: INSN_ADDR,
        access: Access::ReadWrite,
        doc: "byte address of the first instruction (16-byte aligned)",
    },
    Reg {
        name: "INSN_COUNT",
        offset: INSN_COUNT,
        access: Access::ReadWrite,
        doc: "number of 128-bit instructions",
    },
    Reg {
        name: "ISA_HASH_LO",
        offset: ISA_HASH_LO,
        access: Access::ReadOnly,
        doc: "low 32 bits of the config's isa_hash()",
    },
    Reg {
        name: "ISA_HASH_HI",
        offset: ISA_HASH_HI,
        access: Access::ReadOnly,
        doc: "high 32 bits of the config's isa_hash()",
    },
    Reg {
        name: "CYCLES",
        offset: CYCLES,
        access: Access::ReadOnly,
        doc: "clock cycles from start to done",
    },
    Reg {
        name: "LOAD_BUSY",
        offset: LOAD_BUSY,
        access: Access::ReadOnly,
        doc: "cycles the load module had an instruction in progress (stalls included)",
    },
    Reg {
        name: "COMPUTE_BUSY",
        offset: COMPUTE_BUSY,
        access: Access::ReadOnly,
        doc: "cycles the compute module had an instruction in progress (stalls included)",
    },
    Reg {
        name: "STORE_BUSY",
        offset: STORE_BUSY,
        access: Access::ReadOnly,
        doc: "cycles the store module had an instruction in progress (stalls included)",
    },
    Reg {
        name: "LOAD_STALL",
        offset: LOAD_STALL,
        access: Access::ReadOnly,
        doc: "cycles the load module waited on a token (pop empty or push full)",
    },
    Reg {
        name: "COMPUTE_STALL",
        offset: COMPUTE_STALL,
        access: Access::ReadOnly,
        doc: "cycles the compute module waited on a token (pop empty or push full)",
    },
    Reg {
        name: "STORE_STALL",
        offset: STORE_STALL,
        access: Access::ReadOnly,
        doc: "cycles the store module waited on a token (pop empty or push full)",
    },
    Reg {
        name: "DMA_BUSY",
        offset: DMA_BUSY,
        access: Access::ReadOnly,
        doc: "cycles with a DRAM read or write requested or in flight",
    },
    Reg {
        name: "GEMM_UOPS",
        offset: GEMM_UOPS,
        access: Access::ReadOnly,
        doc: "GEMM micro-op iterations without reset_reg (low 32 bits)",
    },
    Reg {
        name: "ALU_UOPS",
        offset: ALU_UOPS,
        access: Access::ReadOnly,
        doc: "ALU micro-op iterations without reset_reg (low 32 bits)",
    },
    Reg {
        name: "RESET_UOPS",
        offset: RESET_UOPS,
        access: Access::ReadOnly,
        doc: "GEMM and ALU micro-op iterations with reset_reg (low 32 bits)",
    },
    Reg {
        name: "INSNS",
        offset: INSNS,
        access: Access::ReadOnly,
        doc: "instructions fetched in this run",
    },
];

/// The register by name.
pub fn by_name(name: &str) -> Option<&'static Reg> {
    MAP.iter().find(|r| r.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_consecutive_words_and_fit_the_address_space() {
        for (i, r) in MAP.iter().enumerate() {
            assert_eq!(r.offset, 4 * i as u32, "{}", r.name);
        }
        assert!((MAP.len() as u32) * 4 <= 1 << ADDR_BITS);
    }

    /// A register file in memory that finishes after three polls.
    struct Fake {
        regs: [u32; 32],
        log: Vec<String>,
    }

    impl Host for Fake {
        type Error = String;
        fn read_reg(&mut self, offset: u32) -> Result<u32, String> {
            self.log.push(format!("r{offset:#x}"));
            Ok(self.regs[offset as usize / 4])
        }
        fn write_reg(&mut self, offset: u32, value: u32) -> Result<(), String> {
            self.log.push(format!("w{offset:#x}={value}"));
            self.regs[offset as usize / 4] = value;
            Ok(())
        }
        fn poll_wait(&mut self, polls: u64) -> Result<(), String> {
            if polls == 3 {
                self.regs[0] = CONTROL_DONE;
            }
            if polls > 10 {
                return Err("timeout".into());
            }
            Ok(())
        }
    }

    #[test]
    fn the_run_sequence() {
        let mut f = Fake {
            regs: [0; 32],
            log: vec![],
        };
        f.regs[(CYCLES / 4) as usize] = 77;
        let c = run(&mut f, 0x1000, 5).unwrap();
        assert_eq!(
            f.log[..7],
            [
                "w0x8=4096",
                "w0xc=5",
                "w0x0=1",
                "r0x0",
                "r0x0",
                "r0x0",
                "r0x0"
            ]
        );
        assert_eq!(c.polls, 4);
        assert_eq!(c.control, CONTROL_DONE);
        assert_eq!(c.get("CYCLES"), Some(77));
        assert_eq!(c.registers.len(), MAP.len());
        let cfg = isa::HwConfig::default();
        assert!(check_identity(&mut f, &cfg).unwrap().is_err());
        f.regs[(VERSION / 4) as usize] = VERSION_VALUE;
        f.regs[(ISA_HASH_LO / 4) as usize] = cfg.isa_hash() as u32;
        f.regs[(ISA_HASH_HI / 4) as usize] = (cfg.isa_hash() >> 32) as u32;
        assert_eq!(check_identity(&mut f, &cfg), Ok(Ok(())));
    }
}
