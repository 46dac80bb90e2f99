//! Identifier rules: every name the builder accepts prints as a plain Verilog identifier and
//! survives Verilator's C++ translation unchanged.
//!
//! A name is `[A-Za-z][A-Za-z0-9_]*`, has no `__` (Verilator encodes it) and is not a
//! Verilog-2005, SystemVerilog or C++ keyword (Verilator parses `.v` files as SystemVerilog
//! and turns top-level ports into C++ members).

#[rustfmt::skip]
const KEYWORDS: &[&str] = &[
    // Verilog-2005
    "always", "and", "assign", "automatic", "begin", "buf", "bufif0", "bufif1", "case", "casex",
    "casez", "cell", "cmos", "config", "deassign", "default", "defparam", "design", "disable",
    "edge", "else", "end", "endcase", "endconfig", "endfunction", "endgenerate", "endmodule",
    "endprimitive", "endspecify", "endtable", "endtask", "event", "for", "force", "forever",
    "fork", "function", "generate", "genvar", "highz0", "highz1", "if", "ifnone", "incdir",
    "include", "initial", "inout", "input", "instance", "integer", "join", "large", "liblist",
    "library", "localparam", "macromodule", "medium", "module", "nand", "negedge", "nmos",
    "nor", "noshowcancelled", "not", "notif0", "notif1", "or", "output", "parameter", "pmos",
    "posedge", "primitive", "pull0", "pull1", "pulldown", "pullup", "pulsestyle_onevent",
    "pulsestyle_ondetect", "rcmos", "real", "realtime", "reg", "release", "repeat", "rnmos",
    "rpmos", "rtran", "rtranif0", "rtranif1", "scalared", "showcancelled", "signed", "small",
    "specify", "specparam", "strong0", "strong1", "supply0", "supply1", "table", "task", "time",
    "tran", "tranif0", "tranif1", "tri", "tri0", "tri1", "triand", "trior", "trireg",
    "unsigned", "use", "uwire", "vectored", "wait", "wand", "weak0", "weak1", "while", "wire",
    "wor", "xnor", "xor",
    // SystemVerilog additions
    "accept_on", "alias", "always_comb", "always_ff", "always_latch", "assert", "assume",
    "before", "bind", "bins", "binsof", "bit", "break", "byte", "chandle", "checker", "class",
    "clocking", "const", "constraint", "context", "continue", "cover", "covergroup",
    "coverpoint", "cross", "dist", "do", "endchecker", "endclass", "endclocking", "endgroup",
    "endinterface", "endpackage", "endprogram", "endproperty", "endsequence", "enum",
    "eventually", "expect", "export", "extends", "extern", "final", "first_match", "foreach",
    "forkjoin", "global", "iff", "ignore_bins", "illegal_bins", "implements", "implies",
    "import", "inside", "int", "interconnect", "interface", "intersect", "join_any",
    "join_none", "let", "local", "logic", "longint", "matches", "modport", "nettype", "new",
    "nexttime", "null", "package", "packed", "priority", "program", "property", "protected",
    "pure", "rand", "randc", "randcase", "randsequence", "ref", "reject_on", "restrict",
    "return", "s_always", "s_eventually", "s_nexttime", "s_until", "s_until_with", "sequence",
    "shortint", "shortreal", "soft", "solve", "static", "string", "strong", "struct", "super",
    "sync_accept_on", "sync_reject_on", "tagged", "this", "throughout", "timeprecision",
    "timeunit", "type", "typedef", "union", "unique", "unique0", "until", "until_with",
    "untyped", "var", "virtual", "void", "wait_order", "weak", "wildcard", "with", "within",
    // C++ (Verilator makes ports and signals C++ members)
    "alignas", "alignof", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "case", "catch",
    "char", "char8_t", "char16_t", "char32_t", "compl", "concept", "consteval", "constexpr",
    "constinit", "const_cast", "co_await", "co_return", "co_yield", "decltype", "delete",
    "double", "dynamic_cast", "explicit", "false", "float", "friend", "goto", "inline", "long",
    "mutable", "namespace", "noexcept", "not_eq", "nullptr", "operator", "or_eq", "private",
    "public", "register", "reinterpret_cast", "requires", "short", "signed", "sizeof",
    "static_assert", "static_cast", "switch", "template", "thread_local", "throw", "true",
    "try", "typeid", "typename", "using", "volatile", "wchar_t", "xor_eq", "main",
];

/// Why `name` is not a valid identifier, or `None` if it is.
pub(crate) fn invalid_reason(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    match chars.next() {
        None => return Some("it is empty"),
        Some(c) if !c.is_ascii_alphabetic() => return Some("it must start with a letter"),
        _ => {}
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some("it may only contain ASCII letters, digits and `_`");
    }
    if name.contains("__") {
        return Some("it contains `__`, which Verilator mangles");
    }
    if KEYWORDS.contains(&name) {
        return Some("it is a Verilog, SystemVerilog or C++ keyword");
    }
    None
}

/// Panics with a precise message if `name` is not a valid identifier.
#[track_caller]
pub(crate) fn check(what: &str, name: &str) {
    if let Some(why) = invalid_reason(name) {
        panic!("invalid {what} name `{name}`: {why}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert!(invalid_reason("count").is_none());
        assert!(invalid_reason("a_b9").is_none());
        assert!(invalid_reason("9a").is_some());
        assert!(invalid_reason("_a").is_some());
        assert!(invalid_reason("a__b").is_some());
        assert!(invalid_reason("a$b").is_some());
        assert!(invalid_reason("logic").is_some());
        assert!(invalid_reason("new").is_some());
        assert!(invalid_reason("").is_some());
    }
}
