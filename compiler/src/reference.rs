//! Integer reference executor (in progress).
