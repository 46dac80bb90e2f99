//! Differential test of the printer: random expression DAGs (shared subexpressions, mixed
//! signedness, slices of arbitrary expressions, products inside larger expressions, dynamic
//! shifts, muxes) are built through the builder API while a Rust reference evaluates the
//! same operations; the Verilated module must agree on random inputs.

use std::rc::Rc;

use hdl::{ModuleBuilder, Sig};

use crate::util::{build, Rng};

type Eval = Rc<dyn Fn(&[u64]) -> u64>;

/// A generated expression: its signal and a reference evaluator over the input values
/// (bit patterns masked to the width).
#[derive(Clone)]
struct Node<'a> {
    sig: Sig<'a>,
    eval: Eval,
}

fn mask(w: u32) -> u64 {
    if w >= 64 {
        u64::MAX
    } else {
        (1u64 << w) - 1
    }
}

/// Sign-extends the low `w` bits of `v`.
fn sx(v: u64, w: u32) -> i64 {
    if w >= 64 {
        v as i64
    } else {
        ((v << (64 - w)) as i64) >> (64 - w)
    }
}

struct Gen<'a> {
    m: &'a ModuleBuilder,
    rng: Rng,
    inputs: Vec<Node<'a>>,
    pool: Vec<Node<'a>>,
}

impl<'a> Gen<'a> {
    fn w(n: &Node<'a>) -> u32 {
        n.sig.width()
    }

    /// `n` resized to `w` bits with signedness `signed`.
    fn fit(&mut self, n: Node<'a>, w: u32, signed: bool) -> Node<'a> {
        let nw = Gen::w(&n);
        let ns = n.sig.is_signed();
        let sig = n.sig.resize(w);
        let sig = if signed {
            sig.as_signed()
        } else {
            sig.as_unsigned()
        };
        let f = n.eval.clone();
        Node {
            sig,
            eval: Rc::new(move |x| {
                let v = f(x);
                if w <= nw {
                    v & mask(w)
                } else if ns {
                    (sx(v, nw) as u64) & mask(w)
                } else {
                    v
                }
            }),
        }
    }

    fn leaf(&mut self) -> Node<'a> {
        if self.rng.chance(75) {
            let i = self.rng.below(self.inputs.len() as u64) as usize;
            self.inputs[i].clone()
        } else {
            let w = 1 + self.rng.below(20) as u32;
            let v = self.rng.bits(w);
            let sig = self.m.lit(v, w);
            let sig = if self.rng.chance(30) {
                sig.as_signed()
            } else {
                sig
            };
            Node {
                sig,
                eval: Rc::new(move |_| v),
            }
        }
    }

    fn gen(&mut self, depth: u32) -> Node<'a> {
        if depth == 0 {
            return self.leaf();
        }
        if !self.pool.is_empty() && self.rng.chance(15) {
            let i = self.rng.below(self.pool.len() as u64) as usize;
            return self.pool[i].clone();
        }
        let n = match self.rng.below(12) {
            0..=3 => self.binary(depth),
            4..=6 => self.unary(depth),
            7 => self.product(depth),
            8 => self.compare(depth),
            9 => self.shift(depth),
            10 => self.mux(depth),
            _ => self.concat_or_index(depth),
        };
        self.pool.push(n.clone());
        n
    }

    fn binary(&mut self, depth: u32) -> Node<'a> {
        let a = self.gen(depth - 1);
        let b = self.gen(depth - 1);
        let (w, s) = (Gen::w(&a), a.sig.is_signed());
        let b = self.fit(b, w, s);
        let (fa, fb) = (a.eval.clone(), b.eval.clone());
        let (sig, op): (Sig<'a>, fn(u64, u64) -> u64) = match self.rng.below(5) {
            0 => (a.sig + b.sig, |x, y| x.wrapping_add(y)),
            1 => (a.sig - b.sig, |x, y| x.wrapping_sub(y)),
            2 => (a.sig & b.sig, |x, y| x & y),
            3 => (a.sig | b.sig, |x, y| x | y),
            _ => (a.sig ^ b.sig, |x, y| x ^ y),
        };
        Node {
            sig,
            eval: Rc::new(move |x| op(fa(x), fb(x)) & mask(w)),
        }
    }

    fn unary(&mut self, depth: u32) -> Node<'a> {
        let a = self.gen(depth - 1);
        let (w, s) = (Gen::w(&a), a.sig.is_signed());
        let f = a.eval.clone();
        match self.rng.below(8) {
            0 => Node {
                sig: !a.sig,
                eval: Rc::new(move |x| !f(x) & mask(w)),
            },
            1 => Node {
                sig: -a.sig,
                eval: Rc::new(move |x| f(x).wrapping_neg() & mask(w)),
            },
            2 => {
                let k = self.rng.below(3);
                let sig = match k {
                    0 => a.sig.any(),
                    1 => a.sig.all(),
                    _ => a.sig.parity(),
                };
                Node {
                    sig,
                    eval: Rc::new(move |x| {
                        let v = f(x);
                        match k {
                            0 => (v != 0) as u64,
                            1 => (v == mask(w)) as u64,
                            _ => (v.count_ones() % 2) as u64,
                        }
                    }),
                }
            }
            3 | 4 => {
                // A slice of an arbitrary expression.
                let lo = self.rng.below(w as u64) as u32;
                let hi = lo + self.rng.below((w - lo) as u64) as u32;
                Node {
                    sig: a.sig.slice(hi, lo),
                    eval: Rc::new(move |x| (f(x) >> lo) & mask(hi - lo + 1)),
                }
            }
            5 => {
                let to = (w + self.rng.below(12) as u32).min(64);
                let signed = self.rng.chance(50);
                let sig = if signed {
                    a.sig.sext(to)
                } else {
                    a.sig.zext(to)
                };
                Node {
                    sig,
                    eval: Rc::new(move |x| {
                        if signed {
                            (sx(f(x), w) as u64) & mask(to)
                        } else {
                            f(x)
                        }
                    }),
                }
            }
            6 => {
                let signed = !s;
                Node {
                    sig: if signed {
                        a.sig.as_signed()
                    } else {
                        a.sig.as_unsigned()
                    },
                    eval: f,
                }
            }
            _ => {
                let n = 1 + self.rng.below(3) as u32;
                if w * n > 64 {
                    return a;
                }
                Node {
                    sig: a.sig.repeat(n),
                    eval: Rc::new(move |x| {
                        let v = f(x);
                        (0..n).fold(0u64, |acc, _| if w >= 64 { v } else { (acc << w) | v })
                    }),
                }
            }
        }
    }

    fn product(&mut self, depth: u32) -> Node<'a> {
        let a = self.gen(depth - 1);
        let b = self.gen(depth - 1);
        let s = a.sig.is_signed();
        let wa = Gen::w(&a).min(32);
        let wb = Gen::w(&b).min(64 - wa).min(32);
        let a = self.fit(a, wa, s);
        let b = self.fit(b, wb, s);
        let (fa, fb) = (a.eval.clone(), b.eval.clone());
        let w = wa + wb;
        Node {
            sig: a.sig * b.sig,
            eval: Rc::new(move |x| {
                if s {
                    (sx(fa(x), wa).wrapping_mul(sx(fb(x), wb)) as u64) & mask(w)
                } else {
                    fa(x).wrapping_mul(fb(x)) & mask(w)
                }
            }),
        }
    }

    fn compare(&mut self, depth: u32) -> Node<'a> {
        let a = self.gen(depth - 1);
        let b = self.gen(depth - 1);
        let (w, s) = (Gen::w(&a), a.sig.is_signed());
        let b = self.fit(b, w, s);
        let (fa, fb) = (a.eval.clone(), b.eval.clone());
        let k = self.rng.below(8);
        let sig = match k {
            0 => a.sig.eq(b.sig),
            1 => a.sig.ne(b.sig),
            2 => a.sig.lt(b.sig),
            3 => a.sig.le(b.sig),
            4 => a.sig.gt(b.sig),
            5 => a.sig.ge(b.sig),
            6 => a.sig.max(b.sig),
            _ => a.sig.min(b.sig),
        };
        Node {
            sig,
            eval: Rc::new(move |x| {
                let (u, v) = (fa(x), fb(x));
                let (p, q) = if s {
                    (sx(u, w) as i128, sx(v, w) as i128)
                } else {
                    (u as i128, v as i128)
                };
                match k {
                    0 => (p == q) as u64,
                    1 => (p != q) as u64,
                    2 => (p < q) as u64,
                    3 => (p <= q) as u64,
                    4 => (p > q) as u64,
                    5 => (p >= q) as u64,
                    6 => {
                        if p < q {
                            v
                        } else {
                            u
                        }
                    }
                    _ => {
                        if p < q {
                            u
                        } else {
                            v
                        }
                    }
                }
            }),
        }
    }

    fn shift(&mut self, depth: u32) -> Node<'a> {
        let a = self.gen(depth - 1);
        let (w, s) = (Gen::w(&a), a.sig.is_signed());
        let f = a.eval.clone();
        let left = self.rng.chance(50);
        let shr = move |v: u64, k: u64| -> u64 {
            if s {
                (sx(v, w) >> k.min(63)) as u64 & mask(w)
            } else if k >= 64 {
                0
            } else {
                v >> k
            }
        };
        let shl = move |v: u64, k: u64| -> u64 {
            if k >= w as u64 {
                0
            } else {
                (v << k) & mask(w)
            }
        };
        if self.rng.chance(50) {
            let k = self.rng.below(w as u64 + 2) as u32;
            Node {
                sig: if left { a.sig << k } else { a.sig >> k },
                eval: Rc::new(move |x| {
                    if left {
                        shl(f(x), k as u64)
                    } else {
                        shr(f(x), k as u64)
                    }
                }),
            }
        } else {
            let b = self.gen(depth - 1);
            let bw = Gen::w(&b).min(6);
            let b = self.fit(b, bw, false);
            let fb = b.eval.clone();
            Node {
                sig: if left {
                    a.sig.shl_by(b.sig)
                } else {
                    a.sig.shr_by(b.sig)
                },
                eval: Rc::new(move |x| {
                    if left {
                        shl(f(x), fb(x))
                    } else {
                        shr(f(x), fb(x))
                    }
                }),
            }
        }
    }

    fn mux(&mut self, depth: u32) -> Node<'a> {
        let c = self.gen(depth - 1);
        let a = self.gen(depth - 1);
        let b = self.gen(depth - 1);
        let (w, s) = (Gen::w(&a), a.sig.is_signed());
        let b = self.fit(b, w, s);
        let (fc, fa, fb) = (c.eval.clone(), a.eval.clone(), b.eval.clone());
        Node {
            sig: self.m.mux(c.sig.any(), a.sig, b.sig),
            eval: Rc::new(move |x| if fc(x) != 0 { fa(x) } else { fb(x) }),
        }
    }

    fn concat_or_index(&mut self, depth: u32) -> Node<'a> {
        let a = self.gen(depth - 1);
        let b = self.gen(depth - 1);
        if self.rng.chance(50) && Gen::w(&a) + Gen::w(&b) <= 64 {
            let (fa, fb, wb) = (a.eval.clone(), b.eval.clone(), Gen::w(&b));
            return Node {
                sig: a.sig.cat(b.sig),
                eval: Rc::new(move |x| (fa(x) << wb) | fb(x)),
            };
        }
        // index with a 2-bit selector into 3 options (index 3 gives zero)
        let (w, s) = (Gen::w(&a), a.sig.is_signed());
        let c = self.gen(depth - 1);
        let b = self.fit(b, w, s);
        let c = self.fit(c, w, s);
        let sel = self.gen(depth - 1);
        let sel = self.fit(sel, 2, false);
        let (fa, fb, fc, fs) = (
            a.eval.clone(),
            b.eval.clone(),
            c.eval.clone(),
            sel.eval.clone(),
        );
        Node {
            sig: self.m.index(sel.sig, &[a.sig, b.sig, c.sig]),
            eval: Rc::new(move |x| match fs(x) {
                0 => fa(x),
                1 => fb(x),
                2 => fc(x),
                _ => 0,
            }),
        }
    }
}

#[test]
fn random_expressions_match_reference() {
    // HDL_FUZZ_SEED explores other designs (the default keeps the test deterministic).
    let seed = std::env::var("HDL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2024u64);
    let m = ModuleBuilder::new("fuzz");
    let widths = [1u32, 3, 8, 13, 24, 32];
    let inputs: Vec<Node> = widths
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let sig = if i % 2 == 0 {
                m.input(&format!("in{i}"), w)
            } else {
                m.input_signed(&format!("in{i}"), w)
            };
            Node {
                sig,
                eval: Rc::new(move |x: &[u64]| x[i]),
            }
        })
        .collect();
    let mut g = Gen {
        m: &m,
        rng: Rng::new(seed),
        inputs,
        pool: vec![],
    };
    let mut outs = vec![];
    for k in 0..120 {
        let depth = 2 + (k % 5);
        let n = g.gen(depth);
        // Some outputs go through a named wire, read partially.
        let sig = if k % 7 == 0 && n.sig.width() > 2 {
            let w = m.named(&format!("mid{k}"), n.sig);
            let hi = w.width() - 1;
            let f = n.eval.clone();
            outs.push((
                format!("part{k}"),
                Rc::new(move |x: &[u64]| f(x) >> 1) as Eval,
                hi,
            ));
            m.output_from(&format!("part{k}"), w.slice(hi, 1));
            n.sig
        } else {
            n.sig
        };
        let w = sig.width();
        m.output_from(&format!("out{k}"), sig);
        outs.push((format!("out{k}"), n.eval.clone(), w));
    }
    for i in &g.inputs {
        m.allow_unused(i.sig, "random logic may not read every bit");
    }
    drop(g);
    let mut sim = build(m.finish().unwrap());
    let ports: Vec<_> = (0..widths.len())
        .map(|i| sim.port(&format!("in{i}")))
        .collect();
    let out_ports: Vec<_> = outs.iter().map(|(n, _, _)| sim.port(n)).collect();
    let mut rng = Rng::new(7);
    for round in 0..3000 {
        let x: Vec<u64> = widths
            .iter()
            .map(|&w| match rng.below(6) {
                0 => 0,
                1 => mask(w),
                2 => 1u64 << (w - 1),
                _ => rng.bits(w),
            })
            .collect();
        for (p, v) in ports.iter().zip(&x) {
            sim.set(*p, *v);
        }
        sim.eval();
        for ((name, f, w), p) in outs.iter().zip(&out_ports) {
            let expect = f(&x) & mask(*w);
            assert_eq!(
                sim.get(*p),
                expect,
                "`{name}` in round {round} with inputs {x:x?}"
            );
        }
    }
}
