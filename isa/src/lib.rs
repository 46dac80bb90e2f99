//! The single source of truth for a VTA-class accelerator: its configuration and every
//! parameter derived from it, the instruction set and its bit encoding, the assembly text
//! format, and the program container. Everything else in the toolkit derives field layouts,
//! sizes and semantics from this crate.

pub mod asm;
pub mod builder;
pub mod config;
pub mod container;
pub mod insn;
pub mod lanes;
pub mod layout;
pub mod npy;
pub mod program;
pub mod rng;
pub mod spec;
pub mod tokens;

pub use config::{ConfigError, HwConfig, PRESETS};
pub use insn::{
    AluInsn, AluOp, DepFlags, GemmInsn, Insn, MemInsn, MemType, Module, Opcode, Uop, UopLoop,
};
pub use layout::{Codec, Field, IsaError, ListedInsn, StreamError, INSN_BYTES, UOP_BYTES};
pub use program::{DType, Program, Role, Segment};
pub use tokens::{DepFlag, Queue};
