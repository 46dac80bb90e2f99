//! Design errors: width and type errors panic at the offending call with a message naming
//! the module, the operands and both widths; connectivity errors come from `finish()`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use hdl::{widgets, ModuleBuilder, Problem};

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce()) -> String {
    let err = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    if let Some(s) = err.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = err.downcast_ref::<&str>() {
        s.to_string()
    } else {
        panic!("panic without a message")
    }
}

#[track_caller]
fn assert_contains(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "message {msg:?} lacks {p:?}");
    }
}

#[test]
fn add_of_different_widths() {
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("alu");
        let a = m.input("a", 8);
        let b = m.input("b", 9);
        let _ = a + b;
    });
    assert_contains(
        &msg,
        &[
            "module `alu`",
            "width mismatch in `+`",
            "`a` is 8-bit unsigned",
            "`b` is 9-bit unsigned",
            ".zext",
        ],
    );
}

#[test]
fn assign_of_different_width() {
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let a = m.input("a", 8);
        let y = m.output("y", 4);
        m.assign(y, a + 1);
    });
    assert_contains(
        &msg,
        &[
            "width mismatch in assignment to `y`",
            "`y` is 4 bits",
            "`(a + 8'd1)` is 8 bits",
        ],
    );
}

#[test]
fn register_next_of_different_width() {
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let a = m.input("a", 8);
        let r = m.reg("count", 7, 0);
        m.next(r, a);
    });
    assert_contains(
        &msg,
        &[
            "next value of register `count`",
            "`count` is 7 bits",
            "`a` is 8 bits",
        ],
    );
}

#[test]
fn signedness_mismatch() {
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let a = m.input_signed("a", 8);
        let b = m.input("b", 8);
        let _ = a.lt(b);
    });
    assert_contains(
        &msg,
        &[
            "signedness mismatch in `<`",
            "`a` is 8-bit signed",
            "`b` is 8-bit unsigned",
            ".as_signed()",
        ],
    );
}

#[test]
fn constant_that_does_not_fit() {
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let a = m.input("a", 4);
        let _ = a.eq(16);
    });
    assert_contains(&msg, &["the constant 16 does not fit", "4-bit unsigned"]);
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let _ = m.reg("r", 3, 9);
    });
    assert_contains(
        &msg,
        &["reset value 9 of register `r` does not fit in 3 bits"],
    );
}

#[test]
fn slice_out_of_range() {
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let a = m.input("a", 8);
        let _ = a.slice(8, 4);
    });
    assert_contains(&msg, &["slice [8:4] of `a` is out of range", "8 bits wide"]);
}

#[test]
fn memory_address_width() {
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let a = m.input("a", 5);
        let mem = m.mem("ram", 8, 16);
        let _ = mem.read(a);
    });
    assert_contains(
        &msg,
        &[
            "memory `ram`",
            "`a` is 5 bits",
            "16-word memory takes 4-bit addresses",
        ],
    );
}

#[test]
fn instance_port_errors() {
    let fifo = widgets::small_fifo(8, 4);
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let u = m.instance("u_fifo", &fifo);
        u.connect("in_data", m.lit(0, 7));
    });
    assert_contains(
        &msg,
        &[
            "connection of `u_fifo.in_data`",
            "the port is 8 bits",
            "is 7 bits",
        ],
    );
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let u = m.instance("u_fifo", &fifo);
        u.connect("data_in", 0);
    });
    assert_contains(
        &msg,
        &["has no port `data_in`", "in_valid, in_data, out_ready"],
    );
}

#[test]
fn signals_do_not_cross_modules() {
    let msg = panic_message(|| {
        let a = ModuleBuilder::new("a");
        let b = ModuleBuilder::new("b");
        let x = a.input("x", 1);
        let y = b.output("y", 1);
        b.assign(y, x);
    });
    assert_contains(&msg, &["`x` belongs to module `a`", "module `b`"]);
}

#[test]
fn bad_names() {
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let _ = m.input("x", 1);
        let _ = m.wire("x", 2);
    });
    assert_contains(
        &msg,
        &["cannot declare wire `x`", "already used by an input"],
    );
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let _ = m.input("logic", 1);
    });
    assert_contains(&msg, &["invalid input name `logic`", "keyword"]);
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("top");
        let _ = m.input("clk", 1);
    });
    assert_contains(&msg, &["`clk`", "already used by a clock"]);
}

#[test]
fn finish_reports_all_connectivity_problems() {
    let m = ModuleBuilder::new("broken");
    let a = m.input("a", 4);
    let unused = m.input("spare", 3);
    let _ = unused;
    let y = m.output("y", 4);
    m.assign(y, a);
    m.assign(y, !a);
    let _z = m.output("z", 1);
    let r = m.reg("r", 4, 0);
    m.output_from("r_out", r);
    let u = m.instance("u_fifo", &widgets::small_fifo(4, 2));
    u.connect("in_valid", a.bit(0));
    m.output_from("f", u.output("out_data"));
    let err = m.finish().unwrap_err();
    assert_eq!(err.module, "broken");
    let text = err.to_string();
    assert_contains(
        &text,
        &[
            "module `broken` is not well formed",
            "output `y` has 2 drivers (at hdl/tests/errors.rs:",
            "output `z` is never driven",
            "register `r` is never driven (give it a value with m.next)",
            "input `in_data` of instance `u_fifo`",
            "input `out_ready` of instance `u_fifo`",
        ],
    );
    assert!(err
        .problems
        .iter()
        .any(|p| matches!(p, Problem::MultipleDrivers { name, .. } if name == "y")));
}

#[test]
fn finish_reports_unused_inputs() {
    let m = ModuleBuilder::new("top");
    let a = m.input("a", 8);
    let _b = m.input("b", 2);
    m.output_from("y", a.slice(5, 0));
    let err = m.finish().unwrap_err();
    let text = err.to_string();
    assert_contains(
        &text,
        &[
            "input `a`: bits [7:6] are never read",
            "input `b`: all 2 bits are never read",
            "m.allow_unused",
        ],
    );

    // Declaring the intent fixes it.
    let m = ModuleBuilder::new("top");
    let a = m.input("a", 8);
    m.allow_unused(a, "the top bits are reserved");
    m.output_from("y", a.slice(5, 0));
    assert!(m.finish().is_ok());
}

#[test]
fn finish_reports_combinational_loops() {
    let m = ModuleBuilder::new("looped");
    let x = m.input("x", 1);
    let a = m.wire("a", 1);
    let b = m.wire("b", 1);
    m.assign(a, b & x);
    m.assign(b, !a);
    m.output_from("y", a);
    let err = m.finish().unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("combinational loop: a -> b -> a")
            || text.contains("combinational loop: b -> a -> b"),
        "{text}"
    );

    // Through an instance: the small FIFO has no path from inputs to outputs, so a loop via
    // it is fine; an inverter child closes a real loop.
    let inv = {
        let m = ModuleBuilder::new("inv");
        let i = m.input("i", 1);
        m.output_from("o", !i);
        m.finish().unwrap()
    };
    let m = ModuleBuilder::new("outer");
    let w = m.wire("w", 1);
    let u = m.instance("u_inv", &inv);
    u.connect("i", w);
    m.assign(w, u.output("o"));
    m.output_from("y", w);
    let text = m.finish().unwrap_err().to_string();
    assert_contains(&text, &["combinational loop", "u_inv_o", "w"]);

    let m = ModuleBuilder::new("outer2");
    let x = m.input("x", 1);
    let w = m.wire("w", 4);
    let f = m.instance("u_f", &widgets::small_fifo(4, 2));
    f.connect("in_valid", x);
    f.connect("in_data", w);
    f.connect("out_ready", f.output("out_valid"));
    m.assign(w, f.output("out_data") + 1);
    m.output_from("y", w);
    assert!(m.finish().is_ok());
}

#[test]
fn widget_parameters_are_checked() {
    let msg = panic_message(|| {
        let _ = widgets::sync_fifo(8, 12);
    });
    assert_contains(&msg, &["sync_fifo depth must be a power of two, got 12"]);
    let msg = panic_message(|| {
        let cfg = widgets::AxiMasterConfig {
            data_width: 96,
            ..Default::default()
        };
        let _ = widgets::axi4_master("m", &cfg);
    });
    assert_contains(&msg, &["AXI data width must be a power of two, got 96"]);
}

#[test]
fn signal_named_like_its_module() {
    let msg = panic_message(|| {
        let m = ModuleBuilder::new("dot");
        let _ = m.output("dot", 1);
    });
    assert_contains(&msg, &["cannot declare output `dot`", "module name"]);
}
