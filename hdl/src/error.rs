//! Errors of a finished module: connectivity problems found by
//! [`crate::ModuleBuilder::finish`]. (Width and type errors panic at the offending call.)

use std::fmt;

/// One connectivity problem in a module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A wire, output, register, instance input or memory write port has several drivers.
    #[error("{what} `{name}` has {} drivers (at {}); it must have exactly one", locations.len(), locations.join(", "))]
    MultipleDrivers {
        /// What is driven: "wire", "output", "register", ...
        what: &'static str,
        /// Its name (`instance.port` for instance inputs).
        name: String,
        /// Source locations (`file:line:col`) of the drivers.
        locations: Vec<String>,
    },
    /// A wire or output has no `assign`, or a register no `next`.
    #[error("{what} `{name}` is never driven{hint}")]
    Undriven {
        /// "wire", "output" or "register".
        what: &'static str,
        /// Its name.
        name: String,
        /// How to drive it.
        hint: &'static str,
    },
    /// An input of an instance is not connected.
    #[error("input `{port}` of instance `{instance}` (module `{module}`, at {location}) is not connected")]
    Unconnected {
        /// The instance name.
        instance: String,
        /// The instantiated module.
        module: String,
        /// The input port.
        port: String,
        /// Where the instance was created.
        location: String,
    },
    /// A memory that is read but never written.
    #[error("memory `{name}` (at {location}) is read but has no write port")]
    MemoryNotWritten {
        /// The memory name.
        name: String,
        /// Where it was declared.
        location: String,
    },
    /// A loop of combinational logic (through wires, outputs and instances).
    #[error("combinational loop: {}", path.join(" -> "))]
    CombLoop {
        /// Signal names around the loop, each feeding the next; the first is repeated last.
        path: Vec<String>,
    },
    /// Bits of an input that no logic reads.
    #[error("input `{name}`: {bits} never read; use it, or call m.allow_unused({name}, \"why\") if that is intended")]
    UnusedInput {
        /// The input name.
        name: String,
        /// Which bits, e.g. `bits [7:6] are`.
        bits: String,
    },
}

/// The problems found when finishing module `module`, all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesignError {
    /// The module being finished.
    pub module: String,
    /// Every problem found.
    pub problems: Vec<Problem>,
}

impl fmt::Display for DesignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "module `{}` is not well formed:", self.module)?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for DesignError {}
