//! The instruction-level conformance suite: VTA's hardware tests (`tests/hardware/common/
//! test_lib.cc`) and `test_vta_insn.py` cases, rebuilt as programs and checked against
//! ndarray integer references, on several configs and every backend.

#[path = "conformance/alu.rs"]
mod alu;
#[cfg(target_os = "linux")]
#[path = "support/board_emu.rs"]
#[allow(dead_code)]
mod board_emu;
#[path = "conformance/common.rs"]
mod common;
#[path = "conformance/gemm.rs"]
mod gemm;
#[path = "conformance/insn.rs"]
mod insn;
#[path = "conformance/malformed.rs"]
mod malformed;
#[path = "support/sdram_soc.rs"]
mod sdram_support;
