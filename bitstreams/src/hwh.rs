//! Reads a Vivado hardware hand-off file (`.hwh`, the block design as XML) for what a board
//! runtime needs: where a cell's registers are and which clock it runs at. The element and
//! attribute names are those PYNQ's `hwh_parser.py` reads: `MODULE` (`INSTANCE`, `VLNV`,
//! `PORTS/PORT` with `SIGIS="clk"` and `CLKFREQUENCY`) and `MEMRANGE` (`INSTANCE`,
//! `BASEVALUE`, `HIGHVALUE`, `MASTERBUSINTERFACE`, `MEMTYPE`).

/// One block-design cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub instance: String,
    pub vlnv: String,
    /// Clock input ports and their frequency in Hz, in file order.
    pub clocks: Vec<(String, u64)>,
}

/// One address range a master sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    /// The slave cell.
    pub instance: String,
    pub base: u64,
    pub high: u64,
    pub master_interface: String,
    /// `REGISTER` or `MEMORY`.
    pub memtype: String,
}

/// A parsed `.hwh`.
#[derive(Clone, Debug, Default)]
pub struct Hwh {
    pub cells: Vec<Cell>,
    pub ranges: Vec<Range>,
}

/// Why a `.hwh` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HwhError {
    #[error("not well-formed XML: {0}")]
    Xml(#[from] roxmltree::Error),
    #[error("not a Vivado .hwh: the root element is <{0}>, expected <EDKSYSTEM>")]
    Root(String),
    #[error("MEMRANGE of {instance}: {attr} '{value}' is not a 0x hex number")]
    Address {
        instance: String,
        attr: &'static str,
        value: String,
    },
}

/// Why a `.hwh` file could not be read, naming it.
#[derive(Debug, thiserror::Error)]
pub enum HwhFileError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Parse {
        path: std::path::PathBuf,
        source: HwhError,
    },
}

/// Reads and parses the `.hwh` file at `path` (what the board binary's and the Python
/// package's `hwh` options give).
pub fn read_file(path: &std::path::Path) -> Result<Hwh, HwhFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| HwhFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text).map_err(|source| HwhFileError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

fn hex(instance: &str, attr: &'static str, value: &str) -> Result<u64, HwhError> {
    value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
        .and_then(|d| u64::from_str_radix(d, 16).ok())
        .ok_or_else(|| HwhError::Address {
            instance: instance.into(),
            attr,
            value: value.into(),
        })
}

/// Parses the text of a `.hwh` (a leading UTF-8 byte-order mark is skipped).
pub fn parse(text: &str) -> Result<Hwh, HwhError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let doc = roxmltree::Document::parse(text)?;
    let root = doc.root_element();
    if root.tag_name().name() != "EDKSYSTEM" {
        return Err(HwhError::Root(root.tag_name().name().into()));
    }
    let mut h = Hwh::default();
    for n in root.descendants() {
        match n.tag_name().name() {
            "MODULE" => {
                let clocks = n
                    .children()
                    .filter(|c| c.has_tag_name("PORTS"))
                    .flat_map(|ports| ports.children())
                    .filter(|p| p.has_tag_name("PORT") && p.attribute("SIGIS") == Some("clk"))
                    .filter(|p| p.attribute("DIR") == Some("I"))
                    .filter_map(|p| {
                        let hz = p.attribute("CLKFREQUENCY")?.parse::<f64>().ok()?;
                        Some((p.attribute("NAME")?.to_string(), hz.round() as u64))
                    })
                    .collect();
                h.cells.push(Cell {
                    instance: n.attribute("INSTANCE").unwrap_or("").into(),
                    vlnv: n.attribute("VLNV").unwrap_or("").into(),
                    clocks,
                });
            }
            "MEMRANGE" => {
                let instance = n.attribute("INSTANCE").unwrap_or("");
                let range = Range {
                    instance: instance.into(),
                    base: hex(
                        instance,
                        "BASEVALUE",
                        n.attribute("BASEVALUE").unwrap_or(""),
                    )?,
                    high: hex(
                        instance,
                        "HIGHVALUE",
                        n.attribute("HIGHVALUE").unwrap_or(""),
                    )?,
                    master_interface: n.attribute("MASTERBUSINTERFACE").unwrap_or("").into(),
                    memtype: n.attribute("MEMTYPE").unwrap_or("").into(),
                };
                if !h.ranges.contains(&range) {
                    h.ranges.push(range);
                }
            }
            _ => {}
        }
    }
    Ok(h)
}

impl Hwh {
    /// The cell called `instance`.
    pub fn cell(&self, instance: &str) -> Option<&Cell> {
        self.cells.iter().find(|c| c.instance == instance)
    }

    /// The register window (base, high) of `instance`, as the PS's masters see it.
    pub fn registers(&self, instance: &str) -> Option<(u64, u64)> {
        self.ranges
            .iter()
            .find(|r| r.instance == instance && r.memtype == "REGISTER")
            .map(|r| (r.base, r.high))
    }

    /// The clock of `instance` in Hz: its `ap_clk` port, else its first clock input.
    pub fn clock_hz(&self, instance: &str) -> Option<u64> {
        let c = self.cell(instance)?;
        c.clocks
            .iter()
            .find(|(n, _)| n == "ap_clk")
            .or(c.clocks.first())
            .map(|&(_, hz)| hz)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_named() {
        assert!(matches!(parse("<a>"), Err(HwhError::Xml(_))));
        assert!(parse("<PROJECT/>")
            .unwrap_err()
            .to_string()
            .contains("EDKSYSTEM"));
        let e = parse(
            r#"<EDKSYSTEM><MEMRANGE INSTANCE="x" BASEVALUE="12" HIGHVALUE="0x1"/></EDKSYSTEM>"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("x") && e.contains("BASEVALUE"), "{e}");
    }
}
