//! The builder's operators simulated: a counter, signed arithmetic, shifts, wide values.

use hdl::ModuleBuilder;

use crate::util::{build, Rng};

#[test]
fn counter_counts_and_wraps() {
    let m = ModuleBuilder::new("counter");
    let en = m.input("en", 1);
    let count = m.reg("count", 8, 0);
    m.next_when(count, en, count + 1);
    m.output_from("value", count);
    m.output_from("odd", count.bit(0));
    let mut sim = build(m.finish().unwrap());
    let (en, value) = (sim.port("en"), sim.port("value"));
    sim.reset(2);
    assert_eq!(sim.get(value), 0);
    sim.set(en, 1);
    sim.ticks(300);
    assert_eq!(sim.get(value), 300 % 256);
    sim.set(en, 0);
    sim.ticks(6);
    assert_eq!(sim.get(value), 300 % 256);
    let mut rng = Rng::new(1);
    let mut expect = 300u64 % 256;
    for _ in 0..1000 {
        let e = rng.below(2);
        sim.set(en, e);
        sim.tick();
        expect = (expect + e) % 256;
        assert_eq!(sim.get(value), expect);
    }
}

/// Signed and unsigned operators, extensions and shifts, checked against Rust arithmetic:
/// this is what the printer's `$signed` / hoisting rules must get right.
#[test]
fn operators_match_rust_semantics() {
    let m = ModuleBuilder::new("ops");
    let a = m.input_signed("a", 8);
    let b = m.input_signed("b", 8);
    let c = m.input("c", 3);
    let u = m.input("u", 8);
    let v = m.input("v", 8);
    // Products inside larger expressions must not lose their width or sign.
    m.output_from("prod", a * b);
    m.output_from("prod_plus", (a * b) + a.sext(16));
    m.output_from(
        "prod_cat",
        m.cat(&[(u * v).slice(15, 8), (a * b).slice(7, 0)]),
    );
    m.output_from("uprod", u * v);
    m.output_from("sra", a >> 3);
    m.output_from("sra_dyn", a.shr_by(c));
    m.output_from("srl_dyn", u.shr_by(c));
    m.output_from("shl_dyn", u.shl_by(c));
    m.output_from("sra_in_sum", (a >> 2).as_unsigned() + u);
    m.output_from("lt_s", a.lt(b));
    m.output_from("ge_s", a.ge(b));
    m.output_from("lt_u", u.lt(v));
    m.output_from("sext", a.sext(12));
    m.output_from("zext", u.zext(12));
    m.output_from("neg", -a);
    m.output_from("max_s", a.max(b));
    m.output_from("min_u", u.min(v));
    m.output_from("red", m.cat(&[u.any(), u.all(), u.parity()]));
    m.output_from("sel", m.index(c, &[u, v, u ^ v, u & v, !u]));
    m.output_from("case_", m.case(c, &[(1, u), (6, v)], 0x5a));
    let s = m.named("shared", u + v);
    m.output_from("shared_use", s.slice(7, 4).cat((u + v).slice(3, 0)));
    let mut sim = build(m.finish().unwrap());
    let pa = sim.port("a");
    let pb = sim.port("b");
    let pc = sim.port("c");
    let pu = sim.port("u");
    let pv = sim.port("v");
    let outs: Vec<_> = [
        "prod",
        "prod_plus",
        "prod_cat",
        "uprod",
        "sra",
        "sra_dyn",
        "srl_dyn",
        "shl_dyn",
        "sra_in_sum",
        "lt_s",
        "ge_s",
        "lt_u",
        "sext",
        "zext",
        "neg",
        "max_s",
        "min_u",
        "red",
        "sel",
        "case_",
        "shared_use",
    ]
    .iter()
    .map(|n| (n.to_string(), sim.port(n)))
    .collect();
    let mut rng = Rng::new(9);
    for _ in 0..20_000 {
        let (a, b, c) = (
            rng.bits(8) as u8 as i8,
            rng.bits(8) as u8 as i8,
            rng.bits(3) as u32,
        );
        let (u, v) = (rng.bits(8) as u8, rng.bits(8) as u8);
        sim.set_signed(pa, a as i64);
        sim.set_signed(pb, b as i64);
        sim.set(pc, c as u64);
        sim.set(pu, u as u64);
        sim.set(pv, v as u64);
        sim.eval();
        let (ai, bi) = (a as i64, b as i64);
        let p16 = (ai * bi) as u16 as u64;
        let expect = |name: &str| -> u64 {
            match name {
                "prod" => p16,
                "prod_plus" => (ai * bi + ai) as u16 as u64,
                "prod_cat" => ((u as u64 * v as u64) >> 8 << 8) | (p16 & 0xff),
                "uprod" => u as u64 * v as u64,
                "sra" => (a >> 3) as u8 as u64,
                "sra_dyn" => (a >> c) as u8 as u64,
                "srl_dyn" => (u >> c) as u64,
                "shl_dyn" => ((u as u32) << c) as u8 as u64,
                "sra_in_sum" => ((a >> 2) as u8).wrapping_add(u) as u64,
                "lt_s" => (a < b) as u64,
                "ge_s" => (a >= b) as u64,
                "lt_u" => (u < v) as u64,
                "sext" => (ai as u64) & 0xfff,
                "zext" => u as u64,
                "neg" => a.wrapping_neg() as u8 as u64,
                "max_s" => a.max(b) as u8 as u64,
                "min_u" => u.min(v) as u64,
                "red" => {
                    ((u != 0) as u64) << 2 | ((u == 0xff) as u64) << 1 | (u.count_ones() % 2) as u64
                }
                "sel" => {
                    (match c {
                        0 => u,
                        1 => v,
                        2 => u ^ v,
                        3 => u & v,
                        4 => !u,
                        _ => 0,
                    }) as u64
                }
                "case_" => {
                    (match c {
                        1 => u,
                        6 => v,
                        _ => 0x5a,
                    }) as u64
                }
                "shared_use" => u.wrapping_add(v) as u64,
                _ => unreachable!(),
            }
        };
        for (name, port) in &outs {
            assert_eq!(
                sim.get(*port),
                expect(name),
                "`{name}` for a={a} b={b} c={c} u={u} v={v}"
            );
        }
    }
}

/// Low bits of products, which the printer computes at the truncated width (Verilog's
/// context-determined product) when that width is at least both factors' widths: signed and
/// unsigned, into a register, a wire and a larger expression, next to truncations that do
/// not qualify (narrower than a factor, or a product also read whole).
#[test]
fn truncated_products_match_rust_semantics() {
    let m = ModuleBuilder::new("trunc_products");
    let a = m.input_signed("a", 8);
    let w = m.input_signed("w", 25);
    let u = m.input("u", 16);
    let v = m.input("v", 16);
    let q = m.reg_noreset("q", 32);
    m.next(q, (a * w).trunc(32).as_unsigned());
    m.output_from("reg32", q);
    m.output_from("wire26", (a * w).trunc(26));
    m.output_from("sum", (u * v).trunc(16) + u);
    m.output_from("narrow", (u * v).trunc(12));
    let whole = a * w;
    m.output_from("whole", whole);
    m.output_from("whole_low", whole.trunc(30));
    let mut sim = build(m.finish().unwrap());
    let ports: Vec<_> = ["a", "w", "u", "v"].iter().map(|n| sim.port(n)).collect();
    let outs: Vec<_> = ["reg32", "wire26", "sum", "narrow", "whole", "whole_low"]
        .iter()
        .map(|n| (n.to_string(), sim.port(n)))
        .collect();
    let mut rng = Rng::new(13);
    for _ in 0..5_000 {
        let a = rng.bits(8) as u8 as i8 as i64;
        let w = ((rng.bits(25) << 39) as i64) >> 39;
        let (u, v) = (rng.bits(16), rng.bits(16));
        sim.set_signed(ports[0], a);
        sim.set_signed(ports[1], w);
        sim.set(ports[2], u);
        sim.set(ports[3], v);
        sim.tick();
        let p = (a * w) as u64;
        let expect = |name: &str| -> u64 {
            match name {
                "reg32" => p & 0xffff_ffff,
                "wire26" => p & 0x3ff_ffff,
                "sum" => (u * v + u) & 0xffff,
                "narrow" => (u * v) & 0xfff,
                "whole" => p & 0x1_ffff_ffff,
                "whole_low" => p & 0x3fff_ffff,
                _ => unreachable!(),
            }
        };
        for (name, port) in &outs {
            assert_eq!(
                sim.get(*port),
                expect(name),
                "`{name}` for a={a} w={w} u={u} v={v}"
            );
        }
    }
}

/// Products whose factors the printer writes in the product's signed context (sums and
/// differences of sign extensions, shifted ones, a register with an enable), next to ones
/// it must not (a sum that wraps at its own width, a zero extension), against Rust.
#[test]
fn signed_product_factors_match_rust_semantics() {
    let m = ModuleBuilder::new("signed_factors");
    let a = m.input_signed("a", 8);
    let w1 = m.input_signed("w1", 8);
    let w2 = m.input_signed("w2", 8);
    let u = m.input("u", 6);
    let q = m.reg_noreset("q", 32);
    m.next(
        q,
        (a * ((w2.sext(25) << 16) + w1.sext(25)))
            .trunc(32)
            .as_unsigned(),
    );
    m.output_from("pair", q);
    m.output_from("difference", a * (w1.sext(9) - w2.sext(9)));
    m.output_from("wrapping", a * (w1 + w2));
    m.output_from("shifted", a * ((w1.sext(12) << 3) - w2.sext(12)));
    m.output_from("low_bits", a * (w1.sext(10) << 4));
    m.output_from("zero_extended", a * u.zext(7).as_signed());
    let mut sim = build(m.finish().unwrap());
    let ins: Vec<_> = ["a", "w1", "w2", "u"].iter().map(|n| sim.port(n)).collect();
    let outs: Vec<_> = ["pair", "difference", "wrapping", "shifted", "low_bits"]
        .iter()
        .chain(&["zero_extended"])
        .map(|n| (n.to_string(), sim.port(n)))
        .collect();
    let mut rng = Rng::new(29);
    for _ in 0..5_000 {
        let [a, w1, w2] = [0; 3].map(|_| rng.bits(8) as u8 as i8 as i64);
        let u = rng.bits(6) as i64;
        sim.set_signed(ins[0], a);
        sim.set_signed(ins[1], w1);
        sim.set_signed(ins[2], w2);
        sim.set(ins[3], u as u64);
        sim.tick();
        let bits = |v: i64, w: u32| (v as u64) & ((1u64 << w) - 1);
        let expect = |name: &str| -> u64 {
            match name {
                "pair" => bits(a * (w2 * 65536 + w1), 32),
                "difference" => bits(a * (w1 - w2), 17),
                "wrapping" => bits(a * ((w1 + w2) as i8 as i64), 16),
                "shifted" => bits(a * (w1 * 8 - w2), 20),
                "low_bits" => bits(a * ((((w1 << 2) as i8) as i64) << 2), 18),
                "zero_extended" => bits(a * u, 15),
                _ => unreachable!(),
            }
        };
        for (name, port) in &outs {
            assert_eq!(
                sim.get(*port),
                expect(name),
                "`{name}` for a={a} w1={w1} w2={w2} u={u}"
            );
        }
    }
}

/// Values wider than 64 bits through ports, registers, arithmetic and slices.
#[test]
fn wide_values() {
    let w = 200;
    let m = ModuleBuilder::new("wide");
    let x = m.input("x", w);
    let y = m.input("y", w);
    let r = m.reg_noreset("r", w);
    m.next(r, x + y);
    m.output_from("sum_q", r);
    m.output_from("swapped", m.cat(&[x.slice(99, 0), x.slice(199, 100)]));
    m.output_from("eq", x.eq(y));
    let mut sim = build(m.finish().unwrap());
    let (px, py) = (sim.port("x"), sim.port("y"));
    let (sum, swapped, eq) = (sim.port("sum_q"), sim.port("swapped"), sim.port("eq"));
    let mut rng = Rng::new(3);
    let n = 7; // 32-bit words in 200 bits
    let rand = |rng: &mut Rng| -> Vec<u32> {
        let mut v: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
        v[n - 1] &= 0xff;
        v
    };
    let to_big =
        |v: &[u32]| -> Vec<bool> { (0..200).map(|i| v[i / 32] >> (i % 32) & 1 == 1).collect() };
    for _ in 0..2000 {
        let (a, b) = (rand(&mut rng), rand(&mut rng));
        sim.set_wide(px, &a);
        sim.set_wide(py, &b);
        sim.tick();
        // Sum with carries across words, modulo 2^200.
        let mut expect = vec![0u32; n];
        let mut carry = 0u64;
        for i in 0..n {
            let s = a[i] as u64 + b[i] as u64 + carry;
            expect[i] = s as u32;
            carry = s >> 32;
        }
        expect[n - 1] &= 0xff;
        assert_eq!(sim.get_wide(sum), expect);
        let (ab, sb) = (to_big(&a), to_big(&sim.get_wide(swapped)));
        for i in 0..200 {
            assert_eq!(sb[i], ab[(i + 100) % 200]);
        }
        assert_eq!(sim.get_bool(eq), a == b);
    }
}

/// VCD tracing, independent instances of one compiled model, and misuse messages.
#[test]
fn tracing_and_instances() {
    use hdl::verilator::{BuildOptions, Model};
    let m = ModuleBuilder::new("traced");
    let step = m.input_signed("step", 4);
    let acc = m.reg_signed("acc", 12, -5);
    m.next(acc, acc + step.sext(12));
    m.output_from("acc_out", acc);
    let design = hdl::Design::new(m.finish().unwrap());
    let opts = BuildOptions {
        trace: true,
        ..Default::default()
    };
    let mut stages = vec![];
    let mut sim = Model::build_with(&design, &crate::util::cache_dir(), &opts, &mut |s| {
        stages.push(s.to_string())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stages.first().map(String::as_str), Some("generating"));
    assert_eq!(stages.last().map(String::as_str), Some("loading"));
    let vcd = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("traced.vcd");
    sim.trace_open(&vcd, 100.0).unwrap();
    let (step, acc) = (sim.port("step"), sim.port("acc_out"));
    sim.reset(1);
    assert_eq!(sim.get_signed(acc), -5);
    sim.set_signed(step, -3);
    sim.ticks(4);
    assert_eq!(sim.get_signed(acc), -17);
    assert_eq!(sim.cycles(), 5);

    // A second instance starts from scratch and runs independently.
    let mut other = sim.new_instance();
    other.reset(1);
    other.set_signed(step, 7);
    other.tick();
    assert_eq!(other.get_signed(acc), 2);
    assert_eq!(sim.get_signed(acc), -17);
    drop(other);
    sim.trace_close();
    let text = std::fs::read_to_string(&vcd).unwrap();
    assert!(
        text.contains("$var") && text.contains(" acc "),
        "VCD lacks the register:\n{text}"
    );
    // Real time at 100 MHz: picosecond stamps, a half period (5 ns) apart.
    assert!(text.contains("$timescale 1ps $end"), "{text}");
    assert!(
        text.lines().any(|l| l == "#5000") && text.lines().any(|l| l == "#10000"),
        "{text}"
    );

    // Misuse panics with the port's name.
    let msg = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.port("nope")))
        .unwrap_err()
        .downcast::<String>()
        .unwrap();
    assert!(
        msg.contains("no port `nope`") && msg.contains("step"),
        "{msg}"
    );
    let msg = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.set(step, 16)))
        .unwrap_err()
        .downcast::<String>()
        .unwrap();
    assert!(msg.contains("does not fit in `step` (4 bits)"), "{msg}");
    // A model without tracing refuses to trace.
    let mut plain = crate::util::build(design.top().clone());
    assert!(plain.trace_open(&vcd, 100.0).is_err());
}

/// A model made from shim functions the program already has (as a build script links
/// them), here taken from a cached library, behaves like the loaded one.
#[test]
fn model_from_linked_shim_functions() {
    use hdl::verilator::{Model, StaticShim};
    use std::ffi::{c_char, c_int, c_void};
    let top = || {
        let m = ModuleBuilder::new("static_counter");
        let en = m.input("en", 1);
        let count = m.reg("count", 16, 0);
        m.next_when(count, en, count + 3);
        m.output_from("value", count);
        m.finish().unwrap()
    };
    let built = build(top());
    // SAFETY: the library built above from this very design.
    let lib = unsafe { libloading::Library::new(built.library_path()) }.unwrap();
    macro_rules! sym {
        ($name:literal, $ty:ty) => {
            // SAFETY: the shim defines these with exactly these signatures.
            *unsafe { lib.get::<$ty>($name) }.unwrap()
        };
    }
    let shim = StaticShim {
        abi_version: sym!(b"hdl_abi_version\0", unsafe extern "C" fn() -> u32),
        port_count: sym!(b"hdl_port_count\0", unsafe extern "C" fn() -> u32),
        new: sym!(b"hdl_new\0", unsafe extern "C" fn() -> *mut c_void),
        free: sym!(b"hdl_free\0", unsafe extern "C" fn(*mut c_void)),
        eval: sym!(b"hdl_eval\0", unsafe extern "C" fn(*mut c_void)),
        tick: sym!(b"hdl_tick\0", unsafe extern "C" fn(*mut c_void, u64)),
        port_ptr: sym!(
            b"hdl_port_ptr\0",
            unsafe extern "C" fn(*mut c_void, u32) -> *mut c_void
        ),
        trace_open: sym!(
            b"hdl_trace_open\0",
            unsafe extern "C" fn(*mut c_void, *const c_char, u64) -> c_int
        ),
        trace_close: sym!(b"hdl_trace_close\0", unsafe extern "C" fn(*mut c_void)),
    };
    let design = hdl::Design::new(top());
    // SAFETY: the functions come from the compilation of this design.
    let mut sim = unsafe { Model::from_static(&design, shim, false, "<linked counter>") }.unwrap();
    assert_eq!(sim.library_path(), std::path::Path::new("<linked counter>"));
    let (en, value) = (sim.port("en"), sim.port("value"));
    sim.reset(2);
    sim.set(en, 1);
    sim.ticks(10);
    assert_eq!(sim.get(value), 30);
    let mut other = sim.new_instance();
    other.reset(1);
    assert_eq!(other.get(other.port("value")), 0);
    // Not traced: opening a waveform is refused.
    let e = sim
        .trace_open(&std::env::temp_dir().join("never.vcd"), 100.0)
        .unwrap_err();
    assert!(e.to_string().contains("without tracing"), "{e}");
    // A port table that does not match is refused.
    let m = ModuleBuilder::new("static_counter");
    let en = m.input("en", 1);
    m.output_from("value", en);
    m.output_from("extra", en);
    let wrong = hdl::Design::new(m.finish().unwrap());
    // SAFETY: rejected before any port is touched.
    let e = unsafe { Model::from_static(&wrong, shim, false, "<wrong>") }.unwrap_err();
    assert!(e.to_string().contains("ports"), "{e}");
    drop(sim);
    drop(other);
}

/// Registers with an enable whose next values have generated signals of their own (computed
/// inside `if (enable)`, see the printer): they load the right value when enabled, with and
/// without reset, and hold it otherwise.
#[test]
fn enabled_registers_with_local_signals() {
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
    m.output_from("q_out", q);
    m.output_from("c_out", c);
    let mut sim = build(m.finish().unwrap());
    let (pen, pa, pb) = (sim.port("en"), sim.port("a"), sim.port("b"));
    let (pq, pc) = (sim.port("q_out"), sim.port("c_out"));
    sim.reset(2);
    assert_eq!(sim.get_signed(pc), 0);
    let mut rng = Rng::new(3);
    let (mut eq, mut ec) = (None, 0i64);
    for _ in 0..5_000 {
        let (a, b) = (
            rng.bits(8) as u8 as i8 as i64,
            rng.bits(8) as u8 as i8 as i64,
        );
        let e = rng.below(2);
        sim.set(pen, e);
        sim.set_signed(pa, a);
        sim.set_signed(pb, b);
        sim.tick();
        if e == 1 {
            eq = Some(2 * (a + b));
            ec = 2 * (a - b);
        }
        if let Some(eq) = eq {
            assert_eq!(sim.get_signed(pq), eq);
        }
        assert_eq!(sim.get_signed(pc), ec);
    }
}
