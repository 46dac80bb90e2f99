//! Tokens of the assembly text: `nom` recognizers for comments, identifiers, numbers and
//! strings, and the cursor that drives them over the source and turns failures into
//! messages at byte positions.

use nom::branch::alt;
use nom::bytes::complete::{tag_no_case, take_till, take_while, take_while1};
use nom::character::complete::{char, digit1, hex_digit1, one_of, satisfy};
use nom::combinator::{opt, recognize};
use nom::multi::many0_count;
use nom::sequence::preceded;
use nom::{IResult, Parser};

/// An error at a byte position of the source.
pub(super) struct Diag {
    pub pos: usize,
    pub msg: String,
}

pub(super) type R<T> = Result<T, Diag>;

pub(super) fn is_space(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\r'
}

pub(super) fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

pub(super) fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// `; ...` or `# ...` up to (not including) the end of the line.
pub(super) fn comment(i: &str) -> IResult<&str, &str> {
    recognize((one_of(";#"), take_till(|c| c == '\n'))).parse(i)
}

/// Spaces and comments, not newlines.
pub(super) fn blank(i: &str) -> IResult<&str, usize> {
    many0_count(alt((take_while1(is_space), comment))).parse(i)
}

/// Spaces, comments and newlines.
pub(super) fn blank_lines(i: &str) -> IResult<&str, usize> {
    many0_count(alt((take_while1(|c| is_space(c) || c == '\n'), comment))).parse(i)
}

/// `[A-Za-z_][A-Za-z0-9_.]*`
pub(super) fn ident(i: &str) -> IResult<&str, &str> {
    recognize((satisfy(is_ident_start), take_while(is_ident_char))).parse(i)
}

/// A directive name: `.` followed by an identifier.
pub(super) fn directive(i: &str) -> IResult<&str, &str> {
    recognize((char('.'), ident)).parse(i)
}

/// A preset name such as `wide-bus`.
pub(super) fn preset_word(i: &str) -> IResult<&str, &str> {
    take_while1(|c: char| c.is_ascii_alphanumeric() || "_-.".contains(c)).parse(i)
}

/// An integer literal: optional `-`, then decimal digits or `0x` and hex digits.
/// Returns (negative, digits, radix).
pub(super) fn int_literal(i: &str) -> IResult<&str, (bool, &str, u32)> {
    let (i, neg) = opt(char('-')).parse(i)?;
    let (i, (digits, radix)) = alt((
        preceded(tag_no_case("0x"), hex_digit1).map(|d| (d, 16)),
        digit1.map(|d| (d, 10)),
    ))
    .parse(i)?;
    Ok((i, (neg.is_some(), digits, radix)))
}

/// A cursor over the source.
pub(super) struct Cur<'a> {
    pub src: &'a str,
    pub rest: &'a str,
}

impl<'a> Cur<'a> {
    pub(super) fn pos(&self) -> usize {
        self.src.len() - self.rest.len()
    }

    pub(super) fn eat<T>(
        &mut self,
        mut p: impl Parser<&'a str, Output = T, Error = nom::error::Error<&'a str>>,
    ) -> Option<T> {
        match p.parse(self.rest) {
            Ok((rest, v)) => {
                self.rest = rest;
                Some(v)
            }
            Err(_) => None,
        }
    }

    pub(super) fn eat_char(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    pub(super) fn eat_str(&mut self, s: &str) -> bool {
        match self.rest.strip_prefix(s) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    pub(super) fn peek(&self) -> Option<char> {
        self.rest.chars().next()
    }

    pub(super) fn blank(&mut self) {
        self.eat(blank);
    }

    pub(super) fn blank_lines(&mut self) {
        self.eat(blank_lines);
    }

    /// Skips spaces and a comment; true at the end of the line or of the file.
    pub(super) fn at_eol(&mut self) -> bool {
        self.blank();
        self.rest.is_empty() || self.rest.starts_with('\n')
    }

    /// The next token, quoted, for messages.
    pub(super) fn found(&self) -> String {
        if self.rest.is_empty() {
            return "end of file".into();
        }
        if self.rest.starts_with('\n') || self.rest.starts_with("\r\n") {
            return "end of line".into();
        }
        let end = self
            .rest
            .find(|c: char| c.is_whitespace() || c == ';' || c == '#')
            .unwrap_or(self.rest.len());
        let token = if end == 0 {
            &self.rest[..self.rest.chars().next().map_or(0, char::len_utf8)]
        } else {
            &self.rest[..end]
        };
        let shown: String = token.chars().take(40).collect();
        format!("'{shown}'")
    }

    pub(super) fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(Diag {
            pos: self.pos(),
            msg: msg.into(),
        })
    }

    pub(super) fn expected<T>(&self, what: &str) -> R<T> {
        self.err(format!("expected {what}, found {}", self.found()))
    }

    pub(super) fn expect_char(&mut self, c: char, what: &str) -> R<()> {
        if self.eat_char(c) {
            Ok(())
        } else {
            self.expected(what)
        }
    }

    /// An operand or word must be followed by a space, a comment or the end of the line.
    pub(super) fn end_token(&self) -> R<()> {
        match self.peek() {
            None | Some(' ' | '\t' | '\r' | '\n' | ';' | '#') => Ok(()),
            _ => self.err(format!("unexpected {}", self.found())),
        }
    }

    /// The end of a statement: only spaces and a comment may follow on its line.
    pub(super) fn end_statement(&mut self) -> R<()> {
        if self.at_eol() {
            self.eat_char('\n');
            Ok(())
        } else {
            self.err(format!(
                "expected the end of the line, found {}",
                self.found()
            ))
        }
    }

    /// An integer literal with its position; `what` names it in the error.
    pub(super) fn int(&mut self, what: &str) -> R<(i128, usize)> {
        let pos = self.pos();
        let Some((neg, digits, radix)) = self.eat(int_literal) else {
            return self.expected(what);
        };
        let magnitude = i128::from_str_radix(digits, radix).map_err(|_| Diag {
            pos,
            msg: format!("number '{}' is too large", &self.src[pos..self.pos()]),
        })?;
        Ok((if neg { -magnitude } else { magnitude }, pos))
    }

    /// A double-quoted string with `\\`, `\"`, `\n`, `\t`, `\r` and `\u{HEX}` escapes.
    pub(super) fn string(&mut self) -> R<Option<String>> {
        let start = self.pos();
        if !self.eat_char('"') {
            return Ok(None);
        }
        let mut out = String::new();
        let mut chars = self.rest.char_indices();
        loop {
            let Some((i, c)) = chars.next() else {
                return Err(Diag {
                    pos: start,
                    msg: "unterminated string".into(),
                });
            };
            match c {
                '"' => {
                    self.rest = &self.rest[i + 1..];
                    return Ok(Some(out));
                }
                '\n' => {
                    return Err(Diag {
                        pos: start,
                        msg: "unterminated string (strings end on their line)".into(),
                    })
                }
                '\\' => {
                    let esc_pos = self.pos() + i;
                    let bad = |msg: String| Diag { pos: esc_pos, msg };
                    match chars.next().map(|(_, c)| c) {
                        Some('\\') => out.push('\\'),
                        Some('"') => out.push('"'),
                        Some('n') => out.push('\n'),
                        Some('t') => out.push('\t'),
                        Some('r') => out.push('\r'),
                        Some('u') => {
                            let tail = &self.rest[i + 2..];
                            let code = tail
                                .strip_prefix('{')
                                .and_then(|t| t.find('}').map(|e| &t[..e]))
                                .ok_or_else(|| bad("expected \\u{HEX} in a string".into()))?;
                            let ch = u32::from_str_radix(code, 16)
                                .ok()
                                .and_then(char::from_u32)
                                .ok_or_else(|| {
                                    bad(format!("'\\u{{{code}}}' is not a valid character"))
                                })?;
                            out.push(ch);
                            // Skip '{', the digits and '}'.
                            for _ in 0..code.chars().count() + 2 {
                                chars.next();
                            }
                        }
                        other => {
                            return Err(bad(format!(
                                "unknown escape '\\{}' in a string (valid: \\\\ \\\" \\n \\t \\r \\u{{HEX}})",
                                other.map(String::from).unwrap_or_default()
                            )))
                        }
                    }
                }
                c => out.push(c),
            }
        }
    }

    /// A segment name: an identifier or a string.
    pub(super) fn name(&mut self, what: &str) -> R<(String, usize)> {
        let pos = self.pos();
        if let Some(s) = self.string()? {
            return Ok((s, pos));
        }
        match self.eat(ident) {
            Some(n) => Ok((n.to_string(), pos)),
            None => self.expected(what),
        }
    }
}

/// Checks that `v` lies in `lo..=hi`.
pub(super) fn fit(v: i128, lo: i128, hi: i128, pos: usize, what: &str) -> R<i128> {
    if v < lo || v > hi {
        Err(Diag {
            pos,
            msg: format!("{v} is out of range for {what}: it must be between {lo} and {hi}"),
        })
    } else {
        Ok(v)
    }
}
