//! Device trait and backends (in progress).
