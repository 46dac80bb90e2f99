//! ONNX loading (in progress).
