//! The op-support table: for every ONNX node of a model, whether it runs on the accelerator
//! (and as which layer), on the CPU (and why), was fused into another node, removed at load
//! time, or cannot be compiled (and why).

use std::fmt;

/// What happens to one ONNX node.
#[derive(Debug, Clone, PartialEq)]
pub enum Support {
    /// Offloaded: runs on the accelerator as a `qlayer` layer (`QConv2d`, `QDense`, ...) in
    /// plan step `step`. `note` says how (quantization, requantization accuracy vs ONNX).
    Accel {
        layer: &'static str,
        step: usize,
        note: String,
    },
    /// Merged into another node's step (BatchNorm/Relu into a Conv, Q/DQ into a quantized
    /// layer, ...).
    Fused { into: String, how: String },
    /// Runs on the CPU in plan step `step`, exactly with ONNX semantics; `reason` says why it
    /// is not on the accelerator.
    Cpu { step: usize, reason: String },
    /// Removed at load time (constant folding, identity, unused).
    Removed { how: String },
    /// Cannot be compiled: why, and what would make it compile.
    Unsupported { reason: String, fix: String },
    /// Supported, but not placed: other nodes of the model are unsupported.
    NotPlaced { reason: String },
    /// Not analysed: its input's shape is unknown (it comes from an unsupported node).
    NotAnalyzed { reason: String },
}

impl Support {
    /// A short status word.
    pub fn status(&self) -> &'static str {
        match self {
            Support::Accel { .. } => "accelerator",
            Support::Fused { .. } => "fused",
            Support::Cpu { .. } => "cpu",
            Support::Removed { .. } => "removed",
            Support::Unsupported { .. } => "UNSUPPORTED",
            Support::NotPlaced { .. } => "not placed",
            Support::NotAnalyzed { .. } => "not analysed",
        }
    }

    /// The table's details column: where it runs, into what it was fused, or why.
    pub fn details(&self) -> String {
        match self {
            Support::Accel { layer, step, note } => {
                if note.is_empty() {
                    format!("{layer} (step {step})")
                } else {
                    format!("{layer} (step {step}): {note}")
                }
            }
            Support::Fused { into, how } => format!("into {into}: {how}"),
            Support::Cpu { step, reason } => format!("step {step}: {reason}"),
            Support::Removed { how } => how.clone(),
            Support::Unsupported { reason, fix } => format!("{reason}; to compile: {fix}"),
            Support::NotPlaced { reason } | Support::NotAnalyzed { reason } => reason.clone(),
        }
    }

    pub fn is_unsupported(&self) -> bool {
        matches!(self, Support::Unsupported { .. })
    }
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct SupportEntry {
    pub node: String,
    pub op_type: String,
    pub support: Support,
}

/// One entry per ONNX node, in the model's node order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SupportTable {
    pub entries: Vec<SupportEntry>,
}

impl SupportTable {
    /// The entry of a node.
    pub fn get(&self, node: &str) -> Option<&SupportEntry> {
        self.entries.iter().find(|e| e.node == node)
    }

    /// Entries that cannot be compiled.
    pub fn unsupported(&self) -> impl Iterator<Item = &SupportEntry> {
        self.entries.iter().filter(|e| e.support.is_unsupported())
    }

    /// Counts of entries by status word.
    pub fn counts(&self) -> Vec<(&'static str, usize)> {
        let mut v: Vec<(&'static str, usize)> = Vec::new();
        for e in &self.entries {
            let s = e.support.status();
            match v.iter_mut().find(|(k, _)| *k == s) {
                Some((_, n)) => *n += 1,
                None => v.push((s, 1)),
            }
        }
        v
    }

    /// Entries for a given op type.
    pub fn of_type<'a>(&'a self, op_type: &'a str) -> impl Iterator<Item = &'a SupportEntry> + 'a {
        self.entries.iter().filter(move |e| e.op_type == op_type)
    }
}

impl fmt::Display for SupportTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wn = self
            .entries
            .iter()
            .map(|e| e.node.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let wo = self
            .entries
            .iter()
            .map(|e| e.op_type.len())
            .max()
            .unwrap_or(2)
            .max(2);
        writeln!(f, "{:wn$}  {:wo$}  {:12}  details", "node", "op", "status")?;
        for e in &self.entries {
            writeln!(
                f,
                "{:wn$}  {:wo$}  {:12}  {}",
                e.node,
                e.op_type,
                e.support.status(),
                e.support.details()
            )?;
        }
        Ok(())
    }
}
