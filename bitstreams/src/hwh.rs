//! Reads a Vivado hardware hand-off file (`.hwh`, the block design as XML) for what a board
//! runtime needs: where a cell's registers are and which clock it runs at. The element and
//! attribute names are those PYNQ's `hwh_parser.py` reads: `MODULE` (`INSTANCE`, `VLNV`,
//! `PORTS/PORT` with `SIGIS="clk"` and `CLKFREQUENCY`) and `MEMRANGE` (`INSTANCE`,
//! `BASEVALUE`, `HIGHVALUE`, `MASTERBUSINTERFACE`, `MEMTYPE`).
//!
//! A bitstream may hold several accelerator cores (`vta hw bitstream --cores N`): they are
//! the cells of the `vta_shell` module ([`Hwh::cores`]), core `k` being `vta_k`.

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

/// One accelerator core of a bitstream: its cell and register window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Core {
    pub instance: String,
    pub base: u64,
    pub high: u64,
}

/// A core index the `.hwh` has no core for.
#[derive(Debug, thiserror::Error)]
#[error(
    "core {index} is out of range: the .hwh has {} accelerator core(s){}{}",
    found.len(),
    if found.is_empty() { "" } else { ": " },
    found.iter().enumerate().map(|(k, c)| format!("{k} = {} at {:#010X}", c.instance, c.base)).collect::<Vec<_>>().join(", ")
)]
pub struct NoSuchCore {
    pub index: usize,
    pub found: Vec<Core>,
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

    /// The accelerator cores in core order: the cells whose VLNV names the module `vta_shell`
    /// (a module reference, `xilinx.com:module_ref:vta_shell:1.0`) and that have a register
    /// window, ordered by the number their instance name ends in (`vta_2` before `vta_10`;
    /// the file's own order is Vivado's and not the cores').
    pub fn cores(&self) -> Vec<Core> {
        let mut cores: Vec<Core> = self
            .cells
            .iter()
            .filter(|c| c.vlnv.split(':').nth(2).unwrap_or(&c.vlnv) == "vta_shell")
            .filter_map(|c| {
                let (base, high) = self.registers(&c.instance)?;
                Some(Core {
                    instance: c.instance.clone(),
                    base,
                    high,
                })
            })
            .collect();
        cores.sort_by_key(|c| {
            let stem = c.instance.trim_end_matches(|ch: char| ch.is_ascii_digit());
            let number = c.instance[stem.len()..].parse::<u64>().unwrap_or(u64::MAX);
            (stem.to_string(), number, c.instance.clone())
        });
        cores
    }

    /// Core `index` of [`Hwh::cores`]; out of range, the error lists the cores there are.
    pub fn core(&self, index: usize) -> Result<Core, NoSuchCore> {
        let found = self.cores();
        found.get(index).cloned().ok_or(NoSuchCore { index, found })
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

    /// A two-core ZU+ hand-off file, laid out as Vivado writes one (`tests/fixtures/`), with
    /// the cores' MEMRANGEs in the opposite of core order.
    #[test]
    fn two_cores_are_found_in_order() {
        let h = parse(include_str!("../tests/fixtures/kv260-2core.hwh")).unwrap();
        let cores = h.cores();
        assert_eq!(
            cores,
            [
                Core {
                    instance: "vta_0".into(),
                    base: 0xA000_0000,
                    high: 0xA000_FFFF
                },
                Core {
                    instance: "vta_1".into(),
                    base: 0xA001_0000,
                    high: 0xA001_FFFF
                },
            ]
        );
        assert_eq!(h.core(1).unwrap().base, 0xA001_0000);
        assert_eq!(h.clock_hz("vta_1"), Some(100_000_000));
        let e = h.core(2).unwrap_err().to_string();
        assert!(
            e.contains("core 2 is out of range")
                && e.contains("2 accelerator core(s)")
                && e.contains("0 = vta_0 at 0xA0000000, 1 = vta_1 at 0xA0010000"),
            "{e}"
        );
    }

    #[test]
    fn cores_sort_by_number_and_skip_other_cells() {
        let cell = |i: &str, vlnv: &str, base: &str| {
            format!(
                r#"<MODULE INSTANCE="{i}" VLNV="{vlnv}"/><MEMRANGE INSTANCE="{i}"
                   BASEVALUE="0x{base}0000" HIGHVALUE="0x{base}FFFF" MEMTYPE="REGISTER"/>"#
            )
        };
        let shell = "xilinx.com:module_ref:vta_shell:1.0";
        let text = format!(
            "<EDKSYSTEM>{}{}{}</EDKSYSTEM>",
            cell("vta_10", shell, "A00A"),
            cell("vta_2", shell, "A002"),
            cell("axi_dma_0", "xilinx.com:ip:axi_dma:7.1", "4040"),
        );
        let names: Vec<_> = parse(&text)
            .unwrap()
            .cores()
            .into_iter()
            .map(|c| c.instance)
            .collect();
        assert_eq!(names, ["vta_2", "vta_10"]);
        let e = parse("<EDKSYSTEM/>")
            .unwrap()
            .core(0)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("has 0 accelerator core(s)"), "{e}");
    }
}
