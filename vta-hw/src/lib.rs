//! The accelerator, described with the `hdl` crate: every size is taken from an
//! [`isa::HwConfig`] at run time, every instruction field position from [`isa::layout`], and
//! every behaviour from [`isa::spec`].

pub mod exec;
