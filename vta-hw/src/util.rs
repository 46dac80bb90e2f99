//! Small building blocks shared by the modules: instruction field extraction (always from
//! [`isa::layout`] slots), port forwarding between a parent and a child, a bit-counter
//! helper, and the LUT-RAM command FIFO.

use hdl::{count_bits, Inst, Module, ModuleBuilder, PortRole, Sig};
use isa::layout::{Field, Layout};

/// Field `f` of the 128-bit instruction `insn`, at the position `layout` gives it.
pub(crate) fn field<'a>(insn: Sig<'a>, layout: &Layout, f: Field) -> Sig<'a> {
    let s = layout.slot(f);
    insn.slice(s.lsb + s.width - 1, s.lsb)
}

/// A one-bit field of `insn` (a flag).
pub(crate) fn flag<'a>(insn: Sig<'a>, layout: &Layout, f: Field) -> Sig<'a> {
    let s = layout.slot(f);
    assert_eq!(s.width, 1, "{} is not a one-bit field", f.name());
    insn.bit(s.lsb)
}

/// `log2(v)` of a power of two.
pub(crate) fn log2(v: u32) -> u32 {
    assert!(v.is_power_of_two(), "{v} is not a power of two");
    v.trailing_zeros()
}

/// Address width of a memory of `2^log_depth` words as the ports carry it (at least 1 bit).
pub(crate) fn addr_width(log_depth: u32) -> u32 {
    log_depth.max(1)
}

/// Makes every data port of `inst` whose name satisfies `select` a port of the module
/// being built, with the same name, width and direction.
pub(crate) fn forward_ports<'a>(
    m: &'a ModuleBuilder,
    inst: &Inst<'a>,
    select: impl Fn(&str) -> bool,
) {
    let module = inst.module();
    for p in module.ports() {
        if p.role != PortRole::Data || !select(&p.name) {
            continue;
        }
        match p.dir {
            hdl::Dir::Input => inst.connect(&p.name, m.input(&p.name, p.width)),
            hdl::Dir::Output => {
                m.output_from(&p.name, inst.output(&p.name));
            }
        }
    }
}

/// Width of a port of `module`, panicking with its name when there is no such port.
pub(crate) fn port_width(module: &Module, name: &str) -> u32 {
    module
        .port(name)
        .unwrap_or_else(|| panic!("module `{}` has no port `{name}`", module.name()))
        .width
}

/// A 32-bit event counter cleared by `clear` (which wins) and incremented by `inc`.
pub(crate) fn event_counter<'a>(
    m: &'a ModuleBuilder,
    name: &str,
    clear: Sig<'a>,
    inc: Sig<'a>,
) -> Sig<'a> {
    let c = m.reg(name, 32, 0);
    m.next(c, m.mux(clear, 0, c + inc.zext(32)));
    c
}

/// Deepest [`lutram_fifo`] storage that synthesis keeps in distributed RAM unasked: one
/// LUT-RAM primitive deep (RAM64M).
const LUTRAM_NATIVE_DEPTH: u32 = 64;

/// A FIFO of `depth` (power of two, 2 or more) entries of `width` bits whose storage is
/// distributed (LUT) RAM rather than block RAM: the command queues are the only large
/// memories that are not scratchpads, and block RAM is the resource a Zynq-7020 runs out of
/// first. A storage deeper than one Xilinx LUT-RAM primitive asks for it with `ram_style`
/// ([`hdl::Mem::distributed`]); shallower ones are left to synthesis, which keeps them in
/// LUT-RAM on Xilinx parts (the open-flow boards' queues are all this shallow). One memory
/// rather than banks of primitives: synthesis builds the same LUT-RAMs and read multiplexer
/// with one output register instead of one per bank (yosys, 512 x 128 bits: 1066 -> 128
/// flip-flops, the same 344 RAM64M), and a simulator tests one write and one read enable
/// per cycle instead of one per bank. Module name `lutram_fifo_w<width>_d<depth>`.
///
/// Ports and timing are those of `hdl::widgets::sync_fifo`: `in_valid`, `in_ready`,
/// `in_data`, `out_valid`, `out_ready`, `out_data`, `count`; a word written at cycle t is
/// visible at t + 2, `in_ready` is `count != depth`.
pub fn lutram_fifo(width: u32, depth: u32) -> Module {
    assert!(
        depth.is_power_of_two() && depth >= 2,
        "lutram_fifo depth must be a power of two >= 2, got {depth}"
    );
    let m = ModuleBuilder::new(&format!("lutram_fifo_w{width}_d{depth}"));
    let aw = log2(depth);
    let cw = count_bits(depth as u64);

    let in_valid = m.input("in_valid", 1);
    let in_data = m.input("in_data", width);
    let out_ready = m.input("out_ready", 1);

    let wptr = m.reg("wptr", aw, 0);
    let rptr = m.reg("rptr", aw, 0);
    let stored = m.reg("stored", cw, 0); // entries in the banks
    let out_valid = m.reg("out_valid_q", 1, 0);
    let count = m.reg("count_q", cw, 0); // stored + out_valid

    let in_ready = m.output_from("in_ready", count.ne(depth));
    let push = m.named("push", in_valid & in_ready);
    let pop = m.named("pop", out_valid & out_ready);
    let fetch = m.named("fetch", stored.ne(0) & (!out_valid | out_ready));

    let mem = m.mem("entries", width, depth);
    if depth > LUTRAM_NATIVE_DEPTH {
        mem.distributed();
    }
    mem.write(push, wptr, in_data);
    let out_data = mem.read_en(fetch, rptr);

    m.next_when(wptr, push, wptr + 1);
    m.next_when(rptr, fetch, rptr + 1);
    m.next(stored, stored + push.zext(cw) - fetch.zext(cw));
    m.next(out_valid, fetch | (out_valid & !out_ready));
    m.next(count, count + push.zext(cw) - pop.zext(cw));

    m.output_from("out_valid", out_valid);
    m.output_from("out_data", out_data);
    m.output_from("count", count);
    m.finish().expect("lutram_fifo is well formed")
}
