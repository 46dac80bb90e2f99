//! Design-space exploration: sweep accelerator configs for a network on an FPGA part, with
//! each config's cycles, resources and fit, the Pareto front, and a plot.
//!
//! - [`sweep`]: the axes and their values, expanded into valid configs;
//! - [`network`]: the network, imported and calibrated once, compiled per config;
//! - [`timing`]: the analytic cycle model (an instruction-level simulation calibrated
//!   against the RTL); [`measure`]: cycles from it or from the RTL simulator;
//! - [`resources`]: the target part or board, its resource estimator, the fit;
//! - [`accuracy`]: top-1 on a labelled set, the objective that shows precision;
//! - [`cache`]: results on disk, so a sweep resumes where it stopped;
//! - [`explore`]: evaluating every config in parallel; [`pareto`]: the front;
//! - [`report`]: CSV, JSON and the text summary; [`plot`]: the SVG Pareto plot.
//!
//! The `vta dse` command is the front end; nothing else of the toolkit depends on this crate.

pub mod accuracy;
pub mod cache;
pub mod explore;
pub mod measure;
pub mod network;
pub mod pareto;
pub mod plot;
pub mod report;
pub mod resources;
pub mod sweep;
pub mod timing;

/// Why exploring failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The network cannot be had.
    #[error("{0}")]
    Network(String),
    #[error(transparent)]
    Frontend(#[from] compiler::frontend::FrontendError),
    #[error(transparent)]
    Compile(#[from] compiler::compile::Error),
    #[error("cycle model: {0}")]
    Timing(#[from] timing::TimingError),
    #[error("RTL simulation of {0}")]
    Rtl(String),
    /// The part or board, or its tool.
    #[error("{0}")]
    Target(String),
    #[error(transparent)]
    Synthesis(#[from] vta_hw::report::ReportError),
    #[error(transparent)]
    Cache(#[from] cache::CacheError),
    /// The plot could not be drawn or written.
    #[error("cannot draw {path}: {message}")]
    Plot { path: String, message: String },
    /// A results file or its directory could not be written.
    #[error("cannot write {path}: {message}")]
    Write { path: String, message: String },
}
