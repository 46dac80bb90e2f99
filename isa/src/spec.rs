//! Semantics specification (in progress).
