//! A small embedded HDL: describe hardware with Rust code whose sizes are run-time values,
//! print it as readable Verilog-2005, and simulate it with Verilator.
//!
//! The crate knows nothing of any particular accelerator; it provides:
//!
//! * the **builder** ([`ModuleBuilder`], [`Sig`], [`Mem`], [`Inst`]): ports, wires,
//!   registers with synchronous reset and optional enable, block-RAM memories (one write
//!   port with optional lane enables, any number of registered read ports), instances of
//!   other modules, and expressions with operator overloading;
//! * the **checks** done by [`ModuleBuilder::finish`]: every wire, output, register and
//!   instance input driven exactly once, no combinational loops (also through instances),
//!   no unread input bits unless declared with [`ModuleBuilder::allow_unused`]; logic that
//!   nothing reads is dropped;
//! * the **printer** ([`Design`], module [`verilog`]): one deterministic file, identical
//!   modules merged, caller-supplied header, clean under `verilator --lint-only -Wall`,
//!   memories in the form yosys and Vivado infer as block RAM, and a JSON port manifest;
//! * **simulation** (module [`verilator`], Unix): compile a design with Verilator into a
//!   cached shared library and drive it from Rust through [`verilator::Model`];
//! * **widgets** (module [`widgets`]): FIFOs, a round-robin arbiter, an AXI4-Lite register
//!   file and an AXI4 burst master, each built from run-time parameters, and an AXI4 slave
//!   memory model to simulate a design's master port against (Unix).
//!
//! # Types and widths
//!
//! Every [`Sig`] has a width (1 bit or more, no upper limit in practice) and a signedness.
//! Operators never widen or narrow silently:
//!
//! | operation | operands | result |
//! |---|---|---|
//! | `a + b`, `a - b`, `a & b`, `a \| b`, `a ^ b` | same width and signedness | same type (wrapping) |
//! | `a.eq(b)`, `ne`, `lt`, `le`, `gt`, `ge` | same width and signedness | 1 bit (signed compare if signed) |
//! | `a * b` | same signedness, any widths | full product, `a.width() + b.width()` bits |
//! | `!a`, `-a` | any | same type |
//! | `a << k`, `a >> k`, `a.shl_by(s)`, `a.shr_by(s)` | `k: u32` or unsigned `s` | same type; `>>` is arithmetic when signed |
//! | `a.slice(hi, lo)`, `a.bit(i)`, `a.lane(i, w)` | in range | unsigned |
//! | `m.cat(&[..])`, `m.pack(&[..])`, `a.repeat(n)` | any | unsigned, widths summed |
//! | `a.zext(w)`, `a.sext(w)`, `a.ext(w)`, `a.trunc(w)`, `a.resize(w)` | | explicit width changes |
//! | `m.mux(c, t, f)`, `m.index(sel, &opts)`, `m.case(sel, &arms, default)` | 1-bit `c`; options of one type | that type |
//! | `a.any()`, `a.all()`, `a.parity()` | any | 1 bit |
//!
//! An integer may stand for either operand of a binary operator, a mux arm or an assigned
//! value: it takes the other side's type and must fit (`count + 1`, `state.eq(3)`).
//!
//! # Errors
//!
//! A width, signedness or range mismatch, a bad name, or a signal used in a module it does
//! not belong to is a bug in the code describing the hardware (configurations are validated
//! before hardware is built), so the builder **panics at the offending call** with a
//! message naming the module, the operation, each operand and its width, and a hint, for
//! example:
//!
//! ```text
//! module `alu`: width mismatch in `+`: `a` is 8-bit unsigned but `b` is 9-bit unsigned;
//! use .zext(w) / .sext(w) / .trunc(w) to make them equal
//! ```
//!
//! Problems that only show once a module is complete are returned by
//! [`ModuleBuilder::finish`] as a [`DesignError`] listing all of them ([`Problem`]).
//! Widgets panic on invalid parameters, naming the parameter.
//!
//! # Notes for design authors
//!
//! * **Clock and reset.** One clock domain. Registers and memories use the implicit clock
//!   `clk`; registers declared with a reset value use the synchronous reset `rst` (active
//!   high). Both become ports only when used, and connect to child instances by
//!   themselves. Rename them, or make the reset active-low, with
//!   [`ModuleBuilder::set_clock`] / [`ModuleBuilder::set_reset`] (typically only on the
//!   top: `ap_clk`, `ap_rst_n`). Use [`ModuleBuilder::reg_noreset`] for datapath registers.
//! * **Registers** take one next value ([`ModuleBuilder::next`]) or one next value with an
//!   enable ([`ModuleBuilder::next_when`]); reset wins over the enable. Build "if/else"
//!   chains with [`ModuleBuilder::mux`] and [`ModuleBuilder::case`].
//! * **Memories** ([`ModuleBuilder::mem`]) have one write port (optionally with lane
//!   enables, e.g. one per byte) and any number of read ports, each with a registered
//!   output (one-cycle latency, like block RAM). Two read ports become two BRAMs (or a
//!   true dual-port BRAM) in synthesis. Do not rely on reading the word being written in
//!   the same cycle.
//! * **Names.** Identifiers are checked when declared (letters, digits, `_`, no `__`, no
//!   Verilog/SystemVerilog/C++ keyword such as `buf`, `logic` or `new`). Give modules
//!   names that encode their parameters (`sync_fifo_w32_d16`): modules whose printed
//!   bodies are identical are merged into one definition, and different modules sharing a
//!   name get a numeric suffix. Instance outputs appear as wires `<instance>_<port>`;
//!   [`ModuleBuilder::named`] names any expression (handy in waveforms).
//! * **Unused logic and bits.** Logic nothing reads is dropped when the module is
//!   finished. An input with bits nothing reads is an error unless declared with
//!   [`ModuleBuilder::allow_unused`] (its reason becomes the comment next to the lint
//!   waiver); other partially read signals are waived automatically with a comment saying
//!   which bits. Everything the printer emits passes `verilator --lint-only -Wall`.
//! * **Sizes come from run time.** Widths and depths are `u32` values: derive them from
//!   the configuration, with [`addr_bits`] and [`count_bits`] for index and counter widths.
//! * **Simulation** (see [`verilator::Model`]): a cycle is "set inputs, `eval()`, read
//!   outputs, `tick()`". The first model built into a cache directory also compiles
//!   Verilator's runtime (several seconds); later models only compile themselves, and an
//!   unchanged design is only loaded. Verilator is two-state: no X propagation.
//! * **Not supported:** several clock domains, asynchronous resets, latches, tri-states,
//!   memory initial contents (ROMs), `initial` blocks, or Verilog parameters (every
//!   configuration prints its own concrete modules).
//!
//! # Example: a counter, printed and simulated
//!
//! ```
//! use hdl::{Design, ModuleBuilder};
//!
//! let m = ModuleBuilder::new("counter");
//! let en = m.input("en", 1);
//! let count = m.reg("count", 8, 0); // 8 bits, reset to 0
//! m.next_when(count, en, count + 1); // count up while `en` is high
//! m.output_from("value", count);
//! let design = Design::new(m.finish()?);
//!
//! let verilog = design.verilog("an 8-bit counter");
//! assert!(verilog.contains("if (en) count <= count + 8'd1;"));
//!
//! # #[cfg(unix)] {
//! use hdl::verilator::{default_cache_dir, Model};
//! let mut sim = Model::build(&design, &default_cache_dir(), &mut |stage| eprintln!("{stage}"))?;
//! let (en, value) = (sim.port("en"), sim.port("value"));
//! sim.reset(1);
//! sim.set(en, 1);
//! sim.ticks(10);
//! assert_eq!(sim.get(value), 10);
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod bits;
mod builder;
mod check;
mod error;
mod external;
mod ir;
mod names;
#[cfg(unix)]
pub mod verilator;
pub mod verilog;
pub mod widgets;

pub use bits::Bits;
pub use builder::{addr_bits, count_bits, Inst, Mem, ModuleBuilder, Operand, Sig, MAX_WIDTH};
pub use error::{DesignError, Problem};
pub use external::{external_module, ExternalPort};
pub use ir::{Dir, Module, PortInfo, PortRole};
pub use verilog::{Design, ModuleDefinition};

#[cfg(test)]
mod tests {
    /// Finished modules and designs can be shared between threads, and a simulation can be
    /// moved to another thread.
    #[test]
    fn thread_safety() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<crate::Module>();
        send_sync::<crate::Design>();
        send_sync::<crate::DesignError>();
        #[cfg(unix)]
        {
            send::<crate::verilator::Model>();
            send_sync::<crate::verilator::BuildError>();
        }
    }
}
