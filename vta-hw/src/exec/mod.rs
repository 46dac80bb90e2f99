//! The execution core (in progress).
