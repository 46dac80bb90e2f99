//! Quantization (in progress).
