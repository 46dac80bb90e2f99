//! Lower bounds on the cycles of a program, from its instruction stream alone: what its DRAM
//! traffic needs on the memory bus, and what its compute module needs to issue.
//!
//! The accelerator overlaps its three modules (load, compute, store), so a program takes at
//! least as long as the busier of
//!
//! - the **memory bound**: every byte loaded and stored, and every instruction fetched, over
//!   the AXI data bus at one beat per cycle (`AXI_DATA_WIDTH / 8` bytes per cycle), and
//! - the **compute bound**: what the compute module needs — its execution core runs GEMM
//!   micro-ops (one per cycle, a reset included) and ALU micro-ops (at the core's issue rates,
//!   [`IssueRates`]) in two pipelines at once, so the busier of the two; plus the LOAD UOP /
//!   LOAD ACC transfers it performs itself (over the bus, while neither pipeline runs).
//!
//! The larger of the two is the layer's *roofline*; `cycles / roofline` says how much of the
//! attainable speed a program reaches (the overlap of loads, GEMMs and stores), and the split
//! says which resource limits it. The GEMM core's utilization (GEMM micro-ops per cycle) and
//! the classic memory roofline of the GEMM work alone (`GEMM uops / max(GEMM uops, memory
//! bound)`) come from the same counts.

use isa::{AluInsn, AluOp, HwConfig, Insn, MemType, Program};

/// Cycles per micro-op of the execution core (`vta-hw`'s `exec` module documentation): GEMM
/// and ALU micro-ops with an immediate operand issue one per cycle; a tensor-operand ALU
/// micro-op reads ACC twice through its single read port and issues every other cycle; ALU
/// MUL issues every `1 + 2` cycles (its two extra pipeline stages). Inside the inner loop of
/// a one-micro-op kernel both may issue one per cycle ([`streamed_uops`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IssueRates {
    pub alu_tensor: u64,
    pub alu_mul: u64,
}

impl IssueRates {
    /// The execution core as built today.
    pub const RTL: IssueRates = IssueRates {
        alu_tensor: 2,
        alu_mul: 3,
    };
    /// With tensor-operand ALU micro-ops at one per cycle (a second ACC read port, or ACC
    /// banks by row parity).
    pub const TENSOR_ALU_1: IssueRates = IssueRates {
        alu_tensor: 1,
        alu_mul: 3,
    };
}

/// What a program asks of the accelerator, counted from its instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Work {
    pub gemm_uops: u64,
    /// GEMM micro-ops with `reset_reg` (zeroing accumulators).
    pub reset_uops: u64,
    pub alu_imm_uops: u64,
    pub alu_tensor_uops: u64,
    /// ALU MUL micro-ops, immediate or tensor.
    pub alu_mul_uops: u64,
    /// Of the tensor and the MUL micro-ops, those the execution core issues one per cycle
    /// whatever the rates ([`streamed_uops`]).
    pub alu_tensor_streamed_uops: u64,
    pub alu_mul_streamed_uops: u64,
    /// DRAM bytes of the LOAD UOP, LOAD ACC and LOAD ACC8 transfers, which the compute
    /// module performs itself.
    pub compute_load_bytes: u64,
    /// DRAM bytes of every LOAD and STORE.
    pub dram_bytes: u64,
    pub insns: u64,
}

impl Work {
    /// Counts the work of `p` for `cfg`.
    pub fn of(cfg: &HwConfig, p: &Program) -> Work {
        let mut w = Work {
            insns: p.insns.len() as u64,
            ..Work::default()
        };
        for i in &p.insns {
            match i {
                Insn::Load(m) | Insn::Store(m) => {
                    let bytes = u64::from(m.y_size)
                        * u64::from(m.x_size)
                        * u64::from(cfg.elem_bytes(m.memory_type));
                    w.dram_bytes += bytes;
                    if matches!(i, Insn::Load(_))
                        && matches!(m.memory_type, MemType::Uop | MemType::Acc | MemType::Acc8)
                    {
                        w.compute_load_bytes += bytes;
                    }
                }
                Insn::Gemm(g) => {
                    let n = uops(&g.lp);
                    if g.lp.reset_reg {
                        w.reset_uops += n;
                    } else {
                        w.gemm_uops += n;
                    }
                }
                Insn::Alu(a) => {
                    let n = uops(&a.lp);
                    let streamed = streamed_uops(cfg, a);
                    if a.op == AluOp::Mul {
                        w.alu_mul_uops += n;
                        w.alu_mul_streamed_uops += streamed;
                    } else if a.use_imm {
                        w.alu_imm_uops += n;
                    } else {
                        w.alu_tensor_uops += n;
                        w.alu_tensor_streamed_uops += streamed;
                    }
                }
                Insn::Finish(_) => {}
            }
        }
        w
    }

    /// ALU micro-ops of every kind.
    pub fn alu_uops(&self) -> u64 {
        self.alu_imm_uops + self.alu_tensor_uops + self.alu_mul_uops
    }

    /// Cycles the ALU micro-ops take to issue at `rates`.
    pub fn alu_cycles(&self, rates: IssueRates) -> u64 {
        // A streamed micro-op costs one cycle, not its kind's rate.
        let (t, ts) = (self.alu_tensor_uops, self.alu_tensor_streamed_uops);
        let (m, ms) = (self.alu_mul_uops, self.alu_mul_streamed_uops);
        self.alu_imm_uops + ts + rates.alu_tensor * (t - ts) + ms + rates.alu_mul * (m - ms)
    }

    /// Cycles the traffic takes on the bus of `cfg` (loads, stores, instruction fetch).
    pub fn memory_bound(&self, cfg: &HwConfig) -> u64 {
        let bus = u64::from(cfg.axi_data_width / 8).max(1);
        (self.dram_bytes + isa::INSN_BYTES as u64 * self.insns).div_ceil(bus)
    }

    /// Cycles the compute module needs: the busier of its GEMM pipeline (GEMM and reset
    /// micro-ops) and its ALU pipeline (ALU micro-ops at `rates`), which overlap, and its own
    /// loads on the bus.
    pub fn compute_bound(&self, cfg: &HwConfig, rates: IssueRates) -> u64 {
        let bus = u64::from(cfg.axi_data_width / 8).max(1);
        (self.gemm_uops + self.reset_uops).max(self.alu_cycles(rates))
            + self.compute_load_bytes.div_ceil(bus)
    }

    /// The larger of the two bounds.
    pub fn roofline(&self, cfg: &HwConfig, rates: IssueRates) -> u64 {
        self.memory_bound(cfg).max(self.compute_bound(cfg, rates))
    }
}

/// Micro-ops of `a` that the execution core issues right after the previous one, as
/// `vta_hw::exec::streamed_uops` counts them (the compiler does not depend on `vta-hw`): in
/// each pass of the inner loop of a one-micro-op kernel, all but the first when the loop
/// keeps a tensor operand (not MUL or a table operation), all but the first for MUL with an
/// immediate and all but the first two for MUL with a kept tensor operand when the loop
/// moves `dst` (when no micro-op writes the operand row, as compiled programs keep it).
/// `tests/cycle_models.rs` checks that the two agree.
pub fn streamed_uops(cfg: &HwConfig, a: &AluInsn) -> u64 {
    let lp = &a.lp;
    if lp.reset_reg || lp.uop_end != lp.uop_bgn + 1 {
        return 0;
    }
    let waits = if a.op == AluOp::Mul && cfg.alu_mul {
        match (lp.dst_factor_in != 0, a.use_imm, lp.src_factor_in == 0) {
            (false, _, _) | (true, false, false) => return 0,
            (true, true, _) => 1,
            (true, false, true) => 2,
        }
    } else {
        let table = cfg.alu_lut && matches!(a.op, AluOp::Lut | AluOp::LutWrite);
        if a.use_imm || table || lp.src_factor_in != 0 {
            return 0;
        }
        1
    };
    u64::from(lp.iter_out) * u64::from(lp.iter_in.saturating_sub(waits))
}

fn uops(lp: &isa::UopLoop) -> u64 {
    u64::from(lp.uop_end.saturating_sub(lp.uop_bgn))
        * u64::from(lp.iter_out)
        * u64::from(lp.iter_in)
}
