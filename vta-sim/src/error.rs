//! Run limits and every way a run can fail, each message naming the instruction and the fix.

use std::fmt;
use std::time::Duration;

use isa::{Insn, MemType, Module, StreamError};

use crate::mem::MemFault;

/// Bounds on one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum steps: instructions executed plus micro-op iterations of GEMM and ALU
    /// (reset ones included). Checked before each instruction starts.
    pub max_steps: u64,
    /// Maximum wall-clock time, checked before each instruction starts (an instruction already
    /// running is not interrupted). `None` = no limit.
    pub max_time: Option<Duration>,
}

impl Limits {
    /// The default step budget: 2^28 steps, about 10 s of simulation and some 40 times what
    /// one launch of a compiled ResNet-18 takes; a longer program needs `--max-steps`.
    pub const DEFAULT_MAX_STEPS: u64 = 1 << 28;

    /// No bound at all (a deadlock is still detected).
    pub fn unlimited() -> Self {
        Limits {
            max_steps: u64::MAX,
            max_time: None,
        }
    }

    /// At most `max_steps` steps, no time limit.
    pub fn steps(max_steps: u64) -> Self {
        Limits {
            max_steps,
            max_time: None,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::steps(Self::DEFAULT_MAX_STEPS)
    }
}

/// The four dependency-token queues, routed as `isa::tokens` says.
pub use isa::Queue;

/// A short name of an instruction for messages: `LOAD inp`, `GEMM`, `GEMM reset`, `ALU shr`.
pub fn describe(insn: &Insn) -> String {
    match insn {
        Insn::Load(m) => format!("LOAD {}", m.memory_type.name()),
        Insn::Store(m) => format!("STORE {}", m.memory_type.name()),
        Insn::Gemm(g) if g.lp.reset_reg => "GEMM reset".into(),
        Insn::Gemm(_) => "GEMM".into(),
        Insn::Alu(a) if a.lp.reset_reg => "ALU reset".into(),
        Insn::Alu(a) => format!("ALU {}{}", a.op.name(), if a.use_imm { " imm" } else { "" }),
        Insn::Finish(_) => "FINISH".into(),
    }
}

/// Buffer name in upper case, as in VTA's sources.
pub(crate) fn buffer_name(m: MemType) -> &'static str {
    match m {
        MemType::Uop => "UOP",
        MemType::Wgt => "WGT",
        MemType::Inp => "INP",
        MemType::Acc | MemType::Acc8 => "ACC",
        MemType::Out => "OUT",
    }
}

/// What went wrong inside one instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// A LOAD or STORE whose scratchpad rows `start..end` pass the buffer's depth.
    SramRange {
        buffer: &'static str,
        /// "write" (LOAD) or "read" (STORE).
        access: &'static str,
        start: u64,
        end: u64,
        depth: u32,
    },
    /// A GEMM/ALU micro-op index at or past the buffer depth.
    Index {
        /// "dst", "src" or "wgt".
        field: &'static str,
        buffer: &'static str,
        index: u64,
        depth: u32,
        uop: u32,
        iter_out: u64,
        iter_in: u64,
    },
    /// A DRAM access outside memory; `row` is the DMA row, `elem_addr` its element address.
    Dram {
        row: u32,
        elem_addr: u64,
        fault: MemFault,
    },
    /// A LOAD UOP with a non-zero pad field.
    UopPadding { field: &'static str, value: u8 },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::SramRange {
                buffer,
                access,
                start,
                end,
                depth,
            } => write!(
                f,
                "would {access} {buffer} rows {start}..{end}, past the {buffer} buffer's \
                 {depth} rows"
            ),
            Fault::Index {
                field,
                buffer,
                index,
                depth,
                uop,
                iter_out,
                iter_in,
            } => write!(
                f,
                "micro-op {uop} at iteration (iter_out {iter_out}, iter_in {iter_in}): \
                 {field} index {index} is past the {buffer} buffer's {depth} rows (indices are \
                 uop.{field}_idx + o * {field}_factor_out + i * {field}_factor_in and never wrap)"
            ),
            Fault::Dram {
                row,
                elem_addr,
                fault,
            } => write!(f, "row {row} at element address {elem_addr:#x}: {fault}"),
            Fault::UopPadding { field, value } => write!(
                f,
                "{field} = {value}: micro-op loads take no padding; set every pad field to 0"
            ),
        }
    }
}

/// Why a module cannot go on, in a [`Deadlock`] report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// Instruction `index` cannot start: each queue in `queues` is empty.
    Pop {
        index: usize,
        insn: String,
        queues: Vec<Queue>,
    },
    /// Instruction `index` completed but cannot push: each queue in `queues` is full.
    Push {
        index: usize,
        insn: String,
        queues: Vec<Queue>,
    },
    /// Every instruction of the module was executed.
    Done { executed: usize },
}

/// The state of every module and queue when no module could make progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadlock {
    /// One entry per module, in pipeline order (load, compute, store).
    pub modules: Vec<(Module, Blocked)>,
    /// Tokens in each queue, indexed by [`Queue`] as usize.
    pub tokens: [u32; 4],
    pub capacity: u32,
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "deadlock: no module can make progress and FINISH has not retired"
        )?;
        let names = |qs: &[Queue]| {
            qs.iter()
                .map(|q| q.name())
                .collect::<Vec<_>>()
                .join(" and ")
        };
        for (m, b) in &self.modules {
            let label = format!("{}:", m.name());
            match b {
                Blocked::Pop {
                    index,
                    insn,
                    queues,
                } => writeln!(
                    f,
                    "  {label:<8} waits before instruction {index} ({insn}) to pop {}: empty",
                    names(queues)
                )?,
                Blocked::Push {
                    index,
                    insn,
                    queues,
                } => writeln!(
                    f,
                    "  {label:<8} waits after instruction {index} ({insn}) to push {}: full \
                     ({} tokens)",
                    names(queues),
                    self.capacity
                )?,
                Blocked::Done { executed: 0 } => writeln!(f, "  {label:<8} has no instructions")?,
                Blocked::Done { executed } => writeln!(
                    f,
                    "  {label:<8} ran out of instructions (all {executed} executed)"
                )?,
            }
        }
        let counts = Queue::ALL
            .iter()
            .map(|q| format!("{}={}", q.name(), self.tokens[*q as usize]))
            .collect::<Vec<_>>()
            .join(" ");
        write!(f, "  tokens:  {counts} (capacity {} each)", self.capacity)
    }
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsimError {
    #[error("cannot fetch {count} instructions at {addr:#x}: {fault}")]
    Fetch {
        addr: u64,
        count: u32,
        fault: MemFault,
    },
    #[error("{0}")]
    Decode(StreamError),
    #[error(
        "instruction {index} ({insn}) runs on the {} module, where {flag} is illegal \
         (it names no queue); clear it",
        module.name()
    )]
    IllegalFlag {
        index: usize,
        insn: String,
        module: Module,
        flag: &'static str,
    },
    #[error(
        "the stream of {count} instructions has no FINISH: the accelerator would never signal \
         done; end it with a FINISH"
    )]
    NoFinish { count: usize },
    #[error(
        "instruction {index} (FINISH) sets {flag}: the run is complete when FINISH retires, so \
         that token could never be popped; clear it"
    )]
    FinishPush { index: usize, flag: &'static str },
    #[error("instruction {index} ({insn}): {fault}")]
    At {
        index: usize,
        insn: String,
        fault: Fault,
    },
    #[error(
        "step limit of {limit} exceeded at instruction {index} ({insn}), which needs {needed} \
         steps after {done} done; raise the step limit (`vta sim --max-steps`, `Limits::max_steps`) if the program is meant to run this long"
    )]
    StepLimit {
        limit: u64,
        index: usize,
        insn: String,
        done: u64,
        needed: u64,
    },
    #[error(
        "race on {location}: instruction {first} {first_access} it and instruction {second} \
         {second_access} it, and no dependency token orders the two: on hardware either may \
         come first. Make the second wait for the first through a token"
    )]
    Race {
        location: String,
        first: String,
        first_access: &'static str,
        second: String,
        second_access: &'static str,
    },
    #[error(
        "time limit of {limit:?} exceeded before instruction {index} ({insn}); raise \
         Limits::max_time if the program is meant to run this long"
    )]
    Timeout {
        limit: Duration,
        index: usize,
        insn: String,
    },
    #[error("{0}")]
    Deadlock(Box<Deadlock>),
    #[error("FINISH (instruction {index}) retired, but {}", problems.join("; "))]
    Unfinished { index: usize, problems: Vec<String> },
}

impl FsimError {
    /// The error for `race` in the stream `insns`.
    pub(crate) fn race(race: &crate::races::Race, insns: &[isa::Insn]) -> FsimError {
        let name = |(index, module, _): (usize, isa::Module, bool)| {
            let what = insns.get(index).map_or_else(String::new, describe);
            format!("{index} ({what}, {} module)", module.name())
        };
        let verb = |(_, _, write): (usize, isa::Module, bool)| {
            if write {
                "writes"
            } else {
                "reads"
            }
        };
        FsimError::Race {
            location: race.location.to_string(),
            first: name(race.first),
            first_access: verb(race.first),
            second: name(race.second),
            second_access: verb(race.second),
        }
    }
}
