//! The compiler: ONNX networks to accelerator programs. Front end (ONNX -> typed graph with
//! shapes), quantization (fp32 -> int8, or already-quantized QDQ/QOperator graphs), lowering to
//! the quantized layers of [`qlayer`], and the back end (layout packing, tiling under the
//! scratchpad limits, tensorized GEMM kernels, ALU epilogues, dependency tokens).

pub mod backend;
pub mod compile;
pub mod frontend;
pub mod graph;
pub mod launches;
pub mod onnx;
pub use vta_runtime::qlayer;
pub mod quant;
pub use vta_runtime::reference;
pub mod zoo;
