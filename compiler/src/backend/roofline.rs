//! Lower bounds on the cycles of a program, from its instruction stream alone: what its DRAM
//! traffic needs on the memory bus, and what its compute module needs to issue.
//!
//! The accelerator overlaps its three modules (load, compute, store), so a program takes at
//! least as long as the busier of
//!
//! - the **memory bound**: every byte loaded and stored, and every instruction fetched, over
//!   the AXI data bus at one beat per cycle (`AXI_DATA_WIDTH / 8` bytes per cycle), and
//! - the **compute bound**: what the compute module does one thing after another — GEMM
//!   micro-ops (one per cycle, a reset included), ALU micro-ops at the execution core's issue
//!   rates ([`IssueRates`]), and the LOAD UOP / LOAD ACC transfers it performs itself (over the
//!   bus, while it issues nothing).
//!
//! The larger of the two is the layer's *roofline*; `cycles / roofline` says how much of the
//! attainable speed a program reaches (the overlap of loads, GEMMs and stores), and the split
//! says which resource limits it. The GEMM core's utilization (GEMM micro-ops per cycle) and
//! the classic memory roofline of the GEMM work alone (`GEMM uops / max(GEMM uops, memory
//! bound)`) come from the same counts.

use isa::{AluOp, HwConfig, Insn, MemType, Program};

/// Cycles per micro-op of the execution core (`vta-hw`'s `exec` module documentation): GEMM
/// and ALU micro-ops with an immediate operand issue one per cycle; a tensor-operand ALU
/// micro-op reads ACC twice through its single read port and issues every other cycle; ALU
/// MUL issues every `1 + 2` cycles (its two extra pipeline stages).
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
                    if a.op == AluOp::Mul {
                        w.alu_mul_uops += n;
                    } else if a.use_imm {
                        w.alu_imm_uops += n;
                    } else {
                        w.alu_tensor_uops += n;
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
        self.alu_imm_uops
            + rates.alu_tensor * self.alu_tensor_uops
            + rates.alu_mul * self.alu_mul_uops
    }

    /// Cycles the traffic takes on the bus of `cfg` (loads, stores, instruction fetch).
    pub fn memory_bound(&self, cfg: &HwConfig) -> u64 {
        let bus = u64::from(cfg.axi_data_width / 8).max(1);
        (self.dram_bytes + isa::INSN_BYTES as u64 * self.insns).div_ceil(bus)
    }

    /// Cycles the compute module needs: micro-ops at `rates`, and its own loads on the bus.
    pub fn compute_bound(&self, cfg: &HwConfig, rates: IssueRates) -> u64 {
        let bus = u64::from(cfg.axi_data_width / 8).max(1);
        self.gemm_uops
            + self.reset_uops
            + self.alu_cycles(rates)
            + self.compute_load_bytes.div_ceil(bus)
    }

    /// The larger of the two bounds.
    pub fn roofline(&self, cfg: &HwConfig, rates: IssueRates) -> u64 {
        self.memory_bound(cfg).max(self.compute_bound(cfg, rates))
    }
}

fn uops(lp: &isa::UopLoop) -> u64 {
    u64::from(lp.uop_end.saturating_sub(lp.uop_bgn))
        * u64::from(lp.iter_out)
        * u64::from(lp.iter_in)
}
