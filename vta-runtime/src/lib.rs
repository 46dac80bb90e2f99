//! The runtime: what running a compiled model needs, and nothing of the front end. Tensors
//! ([`tensor`]), the quantized accelerator layers with their exact integer semantics
//! ([`qlayer`]) and the CPU operators with ONNX semantics ([`ops`]), on any device of the
//! HAL (`drivers`). It depends on `isa`, `drivers` and numeric crates only, so a board binary
//! can carry it (a test in the workspace's `tests/` checks the tree).

pub mod ops;
pub mod plan;
pub mod qlayer;
pub mod reference;
pub mod tensor;

pub use tensor::{DType, Fact, Tensor};
