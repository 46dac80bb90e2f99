//! Back end: quantized layers to accelerator programs (in progress).
