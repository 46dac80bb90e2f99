//! Program container file format (in progress).
