//! The cycle model against the RTL simulator, launch by launch: what the constants of
//! `dse::timing::CALIBRATION` were fitted on.
//!
//! `cargo run --release -p dse --example calibrate -- NETWORK CONFIG...` with NETWORK
//! `digits` or `resnet18:SIZE` and CONFIGs presets or config files. The RTL's cycles are kept
//! in `target/calibration/` under a hash of the instruction streams and the accelerator's
//! Verilog, so refitting the model needs no RTL runs.

use dse::network::{Network, NetworkSpec};
use isa::Codec;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let net = args.next().ok_or("usage: calibrate NETWORK CONFIG...")?;
    let spec = match net.split_once(':') {
        Some(("resnet18", size)) => NetworkSpec::Resnet18 {
            size: size.parse()?,
        },
        _ if net == "digits" => NetworkSpec::Digits,
        _ => return Err(format!("unknown network {net}").into()),
    };
    let network = Network::load(&spec)?;
    let store = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/calibration");
    std::fs::create_dir_all(&store)?;
    let (mut sum_err, mut n) = (0.0, 0);
    for c in args {
        let cfg = isa::HwConfig::load(&c)?;
        let model = network.compile(&cfg)?;
        let mem = Default::default();
        let t = std::time::Instant::now();
        let modelled = dse::measure::modelled(&model, &mem)?;
        let model_time = t.elapsed();
        let codec = Codec::new(&cfg);
        let mut streams = Vec::new();
        for l in &model.launches {
            streams.extend(codec.encode_stream(&l.program.program.insns)?);
        }
        // The streams and the accelerator's Verilog (with the whole config in its header: the
        // bus width is not in the streams), so that a change to the RTL measures anew.
        streams.extend(vta_hw::generate(&cfg)?.verilog.bytes());
        let key = store.join(format!(
            "{}-{}-{:016x}.json",
            network.name,
            cfg.config_string(),
            isa::container::fnv1a(&streams)
        ));
        let rtl: Vec<u64> = match std::fs::read_to_string(&key) {
            Ok(text) => serde_json::from_str(&text)?,
            Err(_) => {
                let r = dse::measure::simulated(&model, &mem, &mut |s| eprintln!("  {s}"))?;
                std::fs::write(&key, serde_json::to_string(&r)?)?;
                r
            }
        };
        println!(
            "{} ({c}): model {:.3} s",
            cfg.config_string(),
            model_time.as_secs_f64()
        );
        for (i, (m, r)) in modelled.iter().zip(&rtl).enumerate() {
            let insns = model.launches[i].program.program.insns.len();
            println!(
                "  launch {i:3}: {insns:6} insns  model {m:10}  rtl {r:10}  {:+6.2}%",
                100.0 * (*m as f64 - *r as f64) / *r as f64
            );
        }
        let (m, r): (u64, u64) = (modelled.iter().sum(), rtl.iter().sum());
        let err = 100.0 * (m as f64 - r as f64) / r as f64;
        println!("  total: model {m} rtl {r} {err:+.2}%");
        sum_err += err.abs();
        n += 1;
    }
    if n > 0 {
        println!("mean |error| {:.2}% over {n} configs", sum_err / n as f64);
    }
    Ok(())
}
