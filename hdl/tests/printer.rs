//! Golden tests of the Verilog printer, the port manifest and the Rust port table, plus
//! module deduplication and determinism.

use hdl::{widgets, Design, Module, ModuleBuilder};

fn counter() -> Module {
    let m = ModuleBuilder::new("counter");
    let en = m.input("en", 1);
    let count = m.reg("count", 8, 0);
    m.next_when(count, en, count + 1);
    m.output_from("value", count);
    m.output_from("wrapped", count.eq(255) & en);
    m.finish().unwrap()
}

/// A child used twice, a byte-enable memory, a signed product, an active-low reset, a
/// register without reset, an intentionally unused input bit and a shared subexpression.
fn features() -> Module {
    let child = {
        let m = ModuleBuilder::new("scale");
        let x = m.input_signed("x", 8);
        let k = m.input_signed("k", 8);
        let q = m.reg_noreset_signed("q", 16);
        m.next(q, x * k);
        m.output_from("y", q);
        m.finish().unwrap()
    };
    let m = ModuleBuilder::new("features");
    m.set_reset("rst_n", true);
    let addr = m.input("addr", 4);
    let wdata = m.input("wdata", 32);
    let we = m.input("we", 4);
    let sel = m.input("sel", 2);
    m.allow_unused(sel, "bit 1 is reserved");
    let mem = m.mem("store", 32, 16);
    mem.write_lanes(we, addr, wdata);
    let rd = mem.read(addr);
    let a = m.instance("u_lo", &child);
    a.connect("x", rd.slice(7, 0).as_signed());
    a.connect("k", rd.slice(15, 8).as_signed());
    let b = m.instance("u_hi", &child);
    b.connect("x", rd.slice(23, 16).as_signed());
    b.connect("k", rd.slice(31, 24).as_signed());
    let sum = a.output("y") + b.output("y");
    let acc = m.reg_signed("acc", 16, -1);
    m.next_when(acc, sel.bit(0), acc + sum);
    m.output_from("total", acc);
    m.output_from("sum_is_neg", sum.lt(0) | sum.eq(acc));
    m.finish().unwrap()
}

/// Registers with enables whose next values need generated signals: one read only by a
/// register without reset, one only by a register with reset (both computed inside the
/// register's `if (enable)`), and one also read by an output (a continuous assignment).
fn enabled_locals() -> Module {
    let m = ModuleBuilder::new("enabled_locals");
    let en = m.input("en", 1);
    let a = m.input_signed("a", 8);
    let b = m.input_signed("b", 8);
    let s = a.resize(9) + b.resize(9);
    let q = m.reg_noreset_signed("q", 10);
    m.next_when(q, en, s.resize(10) + s.resize(10));
    let d = a.resize(9) - b.resize(9);
    let c = m.reg_signed("c", 10, 0);
    m.next_when(c, en, d.resize(10) + d.resize(10));
    let shared = a.resize(9) + b.resize(9).slice(8, 1).as_signed().resize(9);
    let r = m.reg_noreset_signed("r", 10);
    m.next_when(r, en, shared.resize(10) + shared.resize(10));
    m.output_from("q_out", q);
    m.output_from("c_out", c);
    m.output_from("r_out", r);
    m.output_from("shared_out", shared);
    m.finish().unwrap()
}

/// `m`'s Verilog against the golden `name`, and `verilator -Wall` silent on it (what the
/// printer writes beyond plain Verilog is waived locally).
fn golden_and_lint_clean(name: &str, m: Module) {
    let d = Design::new(m);
    insta::assert_snapshot!(name, d.verilog(""));
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    if let Err(e) = hdl::verilator::lint(&d, &dir) {
        panic!("lint failed:\n{e}");
    }
}

#[test]
fn enabled_register_locals_verilog() {
    golden_and_lint_clean("enabled_register_locals_verilog", enabled_locals());
}

/// Signed products whose factors print in the product's signed context (a packed pair of
/// weights, a difference of extensions, both under a WIDTH waiver), next to factors that
/// could overflow their own width and so are computed apart (no waiver); the shift keeps
/// only the low 6 bits of `w1`, which the printer sign-extends from there.
fn signed_products() -> Module {
    let m = ModuleBuilder::new("signed_products");
    let en = m.input("en", 1);
    let a = m.input_signed("a", 8);
    let w1 = m.input_signed("w1", 8);
    let w2 = m.input_signed("w2", 8);
    let packed = (w2.sext(25) << 16) + w1.sext(25);
    let q = m.reg_noreset("q", 32);
    m.next_when(q, en, (a * packed).trunc(32).as_unsigned());
    m.output_from("packed_product", q);
    m.output_from("difference_product", a * (w1.sext(9) - w2.sext(9)));
    m.output_from("wrapping_product", a * (w1 + w2));
    m.output_from("truncated_shift", a * (w1.sext(10) << 4));
    m.finish().unwrap()
}

#[test]
fn signed_products_verilog() {
    golden_and_lint_clean("signed_products_verilog", signed_products());
}

/// Registers whose enables share a named first conjunct (a register file's write enable
/// and address decode): a run of them without reset and a run with reset each print under
/// one `if`; one alone with its first conjunct, and one whose whole enable is shared with
/// an output (printed as a wire), print as before.
fn guarded_runs() -> Module {
    let m = ModuleBuilder::new("guarded_runs");
    let we = m.input("we", 1);
    let addr = m.input("addr", 2);
    let d = m.input("d", 8);
    for i in 0..4 {
        let r = m.reg_noreset(&format!("r{i}"), 8);
        m.next_when(r, we & addr.eq(i), d);
        m.output_from(&format!("r{i}_out"), r);
    }
    let flags: Vec<_> = (0..2)
        .map(|i| {
            let f = m.reg(&format!("flag{i}"), 1, 0);
            m.next_when(f, we & addr.bit(i), !f);
            f
        })
        .collect();
    m.output_from("flags", m.cat(&[flags[1], flags[0]]));
    let go = m.input("go", 1);
    let lone = m.reg_noreset("lone", 8);
    m.next_when(lone, go & addr.eq(3), d + 1);
    let shared = we & addr.ne(0);
    let s = m.reg_noreset("s", 8);
    m.next_when(s, shared, d);
    m.output_from("lone_out", lone);
    m.output_from("s_out", s);
    m.output_from("shared_out", shared);
    m.finish().unwrap()
}

#[test]
fn guarded_runs_verilog() {
    golden_and_lint_clean("guarded_runs_verilog", guarded_runs());
}

#[test]
fn counter_verilog() {
    let d = Design::new(counter());
    insta::assert_snapshot!(d.verilog("config: test"));
}

#[test]
fn features_verilog() {
    insta::assert_snapshot!(Design::new(features()).verilog("features: every printer construct"));
}

#[test]
fn features_manifest() {
    insta::assert_snapshot!(Design::new(features()).manifest_json());
}

#[cfg(unix)]
#[test]
fn port_table_and_shim() {
    let d = Design::new(counter());
    insta::assert_snapshot!(hdl::verilator::rust_port_table(&d));
    let shim = hdl::verilator::shim_cpp(&d);
    assert!(shim.contains("case 3: return &t->io_value;"), "{shim}");
    assert!(shim.contains("m->top->io_clk = 1"), "{shim}");
    let (v, wrapper) = hdl::verilator::sim_verilog(&d);
    assert_eq!(wrapper, "hdl_sim_top");
    assert!(v.contains("  counter dut (\n    .clk(io_clk),"), "{v}");
}

#[test]
fn output_is_deterministic() {
    let a = Design::new(features()).verilog("h");
    let b = Design::new(features()).verilog("h");
    assert_eq!(a, b);
    let c = Design::new(widgets::axi4_master("m", &Default::default())).verilog("h");
    let d = Design::new(widgets::axi4_master("m", &Default::default())).verilog("h");
    assert_eq!(c, d);
}

#[test]
fn identical_modules_are_printed_once() {
    // Two separately built but identical FIFOs, and two different modules both named `leaf`.
    let leaf = |w: u32| {
        let m = ModuleBuilder::new("leaf");
        let x = m.input("x", w);
        m.output_from("y", !x);
        m.finish().unwrap()
    };
    let m = ModuleBuilder::new("top");
    let x = m.input("x", 8);
    let f1 = m.instance("u_f1", &widgets::small_fifo(8, 4));
    let f2 = m.instance("u_f2", &widgets::small_fifo(8, 4));
    for f in [f1, f2] {
        f.connect("in_valid", x.bit(0));
        f.connect("in_data", x);
        f.connect("out_ready", x.bit(1));
    }
    let l8 = m.instance("u_l8", &leaf(8));
    l8.connect("x", f1.output("out_data"));
    let l4 = m.instance("u_l4", &leaf(4));
    l4.connect("x", f2.output("out_data").slice(3, 0));
    let l4b = m.instance("u_l4b", &leaf(4));
    l4b.connect("x", f2.output("out_data").slice(7, 4));
    m.output_from(
        "y",
        m.cat(&[l8.output("y"), l4.output("y"), l4b.output("y")]),
    );
    let d = Design::new(m.finish().unwrap());
    let names: Vec<String> = d.definitions().iter().map(|d| d.name.clone()).collect();
    assert_eq!(names, ["small_fifo_w8_d4", "leaf", "leaf_2", "top"]);
    let v = d.verilog("");
    assert_eq!(v.matches("module small_fifo_w8_d4").count(), 1);
    assert!(v.contains("  leaf_2 u_l4 ("), "{v}");
    assert!(v.contains("  leaf_2 u_l4b ("), "{v}");
}
