//! Graph IR (in progress).
