//! The embedded HDL (in progress).
