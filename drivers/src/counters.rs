//! Event counters of one run, defined in `isa::spec` ("Counters"): what every backend
//! reports (the functional simulator counts them; the RTL simulator and the board derive them
//! from the instruction stream with [`Counters::of_stream`] and check the hardware's own).

use std::fmt;

use isa::{HwConfig, Insn, MemType, Module, UopLoop};

/// What one run did. Every count starts at zero at the start of a run (`vta_sim::Fsim::run`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Bytes read from DRAM by LOAD INP (`x_size * y_size * elem_bytes(INP)`; pads read nothing).
    pub inp_load_bytes: u64,
    /// Bytes read from DRAM by LOAD WGT.
    pub wgt_load_bytes: u64,
    /// Bytes read from DRAM by LOAD ACC and LOAD ACC8 (each at its own element size).
    pub acc_load_bytes: u64,
    /// Bytes read from DRAM by LOAD UOP.
    pub uop_load_bytes: u64,
    /// Bytes written to DRAM by STORE.
    pub out_store_bytes: u64,
    /// GEMM micro-ops executed without `reset_reg` (VTA's `gemm_counter`).
    pub gemm_uops: u64,
    /// Micro-ops executed by GEMM or ALU instructions with `reset_reg`.
    pub reset_uops: u64,
    /// ALU micro-ops executed without `reset_reg` (VTA's `alu_counter`).
    pub alu_uops: u64,
    /// Instructions executed by the load module (LOAD INP/WGT, including syncs).
    pub load_insns: u64,
    /// Instructions executed by the compute module (LOAD UOP/ACC/ACC8, GEMM, ALU, FINISH).
    pub compute_insns: u64,
    /// Instructions executed by the store module.
    pub store_insns: u64,
    /// Multiply-accumulates: `gemm_uops * BATCH * BLOCK_IN * BLOCK_OUT`.
    pub macs: u64,
}

impl Counters {
    /// Every counter as (name, value), in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
        [
            ("inp_load_bytes", self.inp_load_bytes),
            ("wgt_load_bytes", self.wgt_load_bytes),
            ("acc_load_bytes", self.acc_load_bytes),
            ("uop_load_bytes", self.uop_load_bytes),
            ("out_store_bytes", self.out_store_bytes),
            ("gemm_uops", self.gemm_uops),
            ("reset_uops", self.reset_uops),
            ("alu_uops", self.alu_uops),
            ("load_insns", self.load_insns),
            ("compute_insns", self.compute_insns),
            ("store_insns", self.store_insns),
            ("macs", self.macs),
        ]
        .into_iter()
    }

    /// The counter called `name`.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The counters of a run that executes every instruction of `insns` (spec section 11):
    /// what every backend reports for a run that completes. The RTL backend reports these,
    /// checked against the hardware's own micro-op and instruction counters.
    pub fn of_stream(cfg: &HwConfig, insns: &[Insn]) -> Counters {
        let uops = |lp: &UopLoop| {
            u64::from(lp.iter_out)
                * u64::from(lp.iter_in)
                * u64::from(lp.uop_end.saturating_sub(lp.uop_bgn))
        };
        let mut c = Counters::default();
        for insn in insns {
            match insn.module() {
                Module::Load => c.load_insns += 1,
                Module::Compute => c.compute_insns += 1,
                Module::Store => c.store_insns += 1,
            }
            match insn {
                Insn::Load(m) => {
                    let bytes = u64::from(m.x_size)
                        * u64::from(m.y_size)
                        * u64::from(cfg.elem_bytes(m.memory_type));
                    match m.memory_type {
                        MemType::Inp => c.inp_load_bytes += bytes,
                        MemType::Wgt => c.wgt_load_bytes += bytes,
                        MemType::Acc | MemType::Acc8 => c.acc_load_bytes += bytes,
                        MemType::Uop => c.uop_load_bytes += bytes,
                        MemType::Out => {}
                    }
                }
                Insn::Store(m) => {
                    c.out_store_bytes += u64::from(m.x_size)
                        * u64::from(m.y_size)
                        * u64::from(cfg.elem_bytes(MemType::Out))
                }
                Insn::Gemm(g) if g.lp.reset_reg => c.reset_uops += uops(&g.lp),
                Insn::Gemm(g) => c.gemm_uops += uops(&g.lp),
                Insn::Alu(a) if a.lp.reset_reg => c.reset_uops += uops(&a.lp),
                Insn::Alu(a) => c.alu_uops += uops(&a.lp),
                Insn::Finish(_) => {}
            }
        }
        c.macs = c.gemm_uops * cfg.macs_per_uop();
        c
    }

    /// Instructions executed by all three modules.
    pub fn insns(&self) -> u64 {
        self.load_insns + self.compute_insns + self.store_insns
    }
}

impl fmt::Display for Counters {
    /// One `name value` line per counter, names padded to a column.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, v)) in self.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{name:<16} {v}")?;
        }
        Ok(())
    }
}
