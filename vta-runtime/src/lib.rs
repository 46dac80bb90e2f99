//! The runtime: what running a compiled model needs, and nothing of the front end. Tensors
//! ([`tensor`]), the quantized accelerator layers with their exact integer semantics
//! ([`qlayer`]) and the CPU operators with ONNX semantics ([`ops`]), on any device of the
//! HAL (`drivers`). It depends on `isa`, `drivers` and numeric crates only, so a board binary
//! can carry it (a test in the workspace's `tests/` checks the tree).

mod arena;
pub mod budget;
pub mod exec;
pub mod file;
pub mod graph;
pub mod io;
pub mod launch;
pub mod layout;
pub mod model;
pub mod ops;
pub mod plan;
pub mod program;
pub mod qlayer;
pub mod reference;
pub mod report;
pub mod resident;
pub mod samples;
pub mod tensor;

pub use model::Model;
pub use report::RunResult;
pub use tensor::{DType, Fact, Tensor};
