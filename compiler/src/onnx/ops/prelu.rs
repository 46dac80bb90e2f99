//! `PRelu` has no attributes; the op itself is `vta_runtime::ops::prelu`.

pub use vta_runtime::ops::prelu::*;
