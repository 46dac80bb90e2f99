//! The randomized differential campaign of the RTL simulator against the functional
//! simulator, as a library for `vta check diff` and the tests:
//!
//! * [`campaign`]: the campaign as a numbered list of units (config, program seed), its seeds
//!   and its shards;
//! * [`gen`]: the random program generator, and each program's memory timing and stalls;
//! * [`compare`]: one case run on both backends, compared, and a difference bisected to the
//!   first differing STORE;
//! * [`plant`]: a planted mismatch, to test the campaign itself;
//! * [`repro`]: reproducer files, one per mismatching unit.

pub mod campaign;
pub mod compare;
pub mod gen;
pub mod plant;
pub mod repro;

pub use campaign::{Campaign, ConfigSource, Unit};
pub use compare::{check, Agreement, Case, Mismatch, MismatchKind};
pub use repro::Reproducer;

/// Why a campaign cannot be set up or a reproducer read.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// A config of the campaign cannot be had or is unfit for the generator.
    #[error("{0}")]
    Config(String),
    /// The generator could not build or store a program (a bug of the generator).
    #[error("the program generator failed: {0}")]
    Generate(String),
    /// A reproducer file is malformed.
    #[error(
        "reproducer {origin}: {what} (a reproducer is the JSON file `vta check diff` writes \
         into its --out directory for each mismatch)"
    )]
    Reproducer { origin: String, what: String },
}
