//! Real bitstreams with open tools for ECP5 and Gowin boards: yosys, nextpnr and the packers
//! (`ecppack`, `gowin_pack`), from the PATH or installed on first use from PyPI.
//!
//! | module | owns |
//! |---|---|
//! | [`board`] | the open-flow boards (`boards/*.json` with a `chip`): pins, clock, resources, default config |
//! | [`top`] | the design to build ([`top::Design`]), the board top `vta_board` around it, the LPF/CST constraints |
//! | [`fit`] | the fit pre-check: block RAM of the memories, then what yosys mapped, against the part |
//! | [`tools`] | finding, installing and running the tools, with progress |
//! | [`flow`] | one run: PLL, synthesis, fit check, place and route, pack |
//! | [`report`] | resources, Fmax per clock and the critical path from nextpnr's report |
//! | `sdram` | the SoC's SDRAM controller, generated with LiteDRAM (feature `soc`) |
//! | `soc` | the accelerator's SoC as a design, and its resources and Fmax on a board, cached (feature `soc`) |

pub mod board;
pub mod fit;
pub mod flow;
pub mod report;
#[cfg(feature = "soc")]
pub mod sdram;
#[cfg(feature = "soc")]
pub mod soc;
pub mod tools;
pub mod top;

pub use board::OpenBoard;
