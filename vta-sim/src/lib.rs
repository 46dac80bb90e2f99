//! Functional simulator (in progress).
