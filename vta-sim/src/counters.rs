//! Event counters of one run, defined in `isa::spec` ("Counters").

use std::fmt;

/// What one run did. Every count starts at zero at the start of [`crate::FuncSim::run`].
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
