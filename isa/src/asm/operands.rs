//! The operands of a statement: `KEY=VALUE` pairs and flag words after a mnemonic, read
//! up to the end of the line as the syntax table ([`super::syntax`]) allows for it.

use super::lex::{ident, Diag, R};
use super::parse::Assembler;
use super::syntax::{Kind, Operand};

/// A parsed value with the positions of its numbers.
#[derive(Debug, Clone)]
pub(super) enum Val {
    /// `N`, `OUT,IN`, `BEGIN..END` or `Y0,Y1,X0,X1`: the numbers and where they start.
    Nums(Vec<(i128, usize)>),
    /// `N`, `NAME`, `NAME+N` or `NAME-N`.
    Addr {
        name: Option<(String, usize)>,
        off: i128,
    },
}

/// One `KEY=VALUE` as given.
pub(super) struct Given {
    pub syntax: &'static Operand,
    /// Position of the key.
    pub pos: usize,
    /// Position of the value.
    pub value_pos: usize,
    pub val: Val,
}

/// The operands of one statement.
pub(super) struct Ops {
    pub what: String,
    pub items: Vec<Given>,
    pub flags: Vec<(&'static str, usize)>,
    /// Position of the statement, for errors about missing operands.
    pub pos: usize,
}

impl Ops {
    pub(super) fn get(&self, key: &str) -> Option<&Given> {
        self.items.iter().find(|o| o.syntax.key == key)
    }

    pub(super) fn has_flag(&self, f: &str) -> bool {
        self.flags.iter().any(|x| x.0 == f)
    }

    pub(super) fn missing<T>(&self, o: &Operand) -> R<T> {
        Err(Diag {
            pos: self.pos,
            msg: format!("{} needs {}={}", self.what, o.key, o.kind.form()),
        })
    }
}

fn list_keys(keys: &[Operand]) -> String {
    keys.iter()
        .map(|o| format!("{}=", o.key))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Assembler<'_> {
    /// Parses the operands of a statement until the end of its line.
    pub(super) fn operands(
        &mut self,
        what: &str,
        pos: usize,
        keys: &'static [Operand],
        flags: &[&'static str],
    ) -> R<Ops> {
        let mut ops = Ops {
            what: what.to_string(),
            items: Vec::new(),
            flags: Vec::new(),
            pos,
        };
        self.cur.end_token()?;
        loop {
            if self.cur.at_eol() {
                return Ok(ops);
            }
            let opos = self.cur.pos();
            let Some(word) = self.cur.eat(ident) else {
                return self.cur.expected("an operand (KEY=VALUE or a flag)");
            };
            let at = |msg: String| Diag { pos: opos, msg };
            let key = keys.iter().find(|k| k.key == word);
            let flag = flags.iter().find(|f| **f == word);
            if self.cur.eat_char('=') {
                let Some(syntax) = key else {
                    return Err(at(if flag.is_some() {
                        format!("'{word}' is a flag and takes no value")
                    } else if keys.is_empty() {
                        format!("unknown key '{word}': {what} takes no KEY=VALUE operands")
                    } else {
                        format!(
                            "unknown key '{word}' for {what} (expected {})",
                            list_keys(keys)
                        )
                    }));
                };
                if let Some(first) = ops.get(syntax.key) {
                    let (_, col) = super::line_col(self.cur.src, first.pos);
                    return Err(at(format!(
                        "duplicate key '{}' (already given at column {col})",
                        syntax.key
                    )));
                }
                let value_pos = self.cur.pos();
                let val = self.value(syntax.kind, syntax.key)?;
                ops.items.push(Given {
                    syntax,
                    pos: opos,
                    value_pos,
                    val,
                });
            } else if let Some(&f) = flag {
                if ops.has_flag(f) {
                    return Err(at(format!("duplicate flag '{f}'")));
                }
                ops.flags.push((f, opos));
            } else if key.is_some() {
                return Err(at(format!("'{word}' needs a value: {word}=...")));
            } else {
                let mut expected: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
                expected.extend(keys.iter().map(|k| format!("{}=", k.key)));
                return Err(at(format!(
                    "unknown operand '{word}' for {what} (expected {})",
                    if expected.is_empty() {
                        "nothing".into()
                    } else {
                        expected.join(", ")
                    }
                )));
            }
            self.cur.end_token()?;
        }
    }

    fn value(&mut self, kind: Kind, key: &str) -> R<Val> {
        let form = format!("{key}={}", kind.form());
        let mut nums = Vec::new();
        match kind {
            Kind::Num => nums.push(self.cur.int(&format!("a number after {key}="))?),
            Kind::Pair | Kind::Quad => {
                for i in 0..kind.arity() {
                    if i > 0 {
                        self.cur.expect_char(',', &format!("',' in {form}"))?;
                    }
                    nums.push(self.cur.int(&form)?);
                }
            }
            Kind::Range => {
                nums.push(self.cur.int(&form)?);
                if !self.cur.eat_str("..") {
                    return self.cur.expected(&format!("'..' in {form}"));
                }
                nums.push(self.cur.int(&form)?);
            }
            Kind::Addr => {
                if matches!(self.cur.peek(), Some(c) if c.is_ascii_digit() || c == '-') {
                    return Ok(Val::Addr {
                        name: None,
                        off: self.cur.int("an address")?.0,
                    });
                }
                let (name, npos) = self.cur.name("an address (N, NAME, NAME+N or NAME-N)")?;
                let sign = if self.cur.eat_char('+') {
                    1
                } else if self.cur.eat_char('-') {
                    -1
                } else {
                    return Ok(Val::Addr {
                        name: Some((name, npos)),
                        off: 0,
                    });
                };
                let (n, _) = self.cur.int("an element offset")?;
                return Ok(Val::Addr {
                    name: Some((name, npos)),
                    off: sign * n,
                });
            }
        }
        Ok(Val::Nums(nums))
    }
}
