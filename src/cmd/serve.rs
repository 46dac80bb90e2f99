//! `vta serve`: serve a device to `--backend remote://HOST:PORT` clients (the remote runner of
//! `drivers::remote`), logging one line per connection and per run on stderr.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use drivers::remote::{serve, ServeOptions, TOKEN_ENV};
use drivers::Device;
use vta_sim::FsimDevice;

use super::sim::{Backend, RtlArgs};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Served {
    /// The functional simulator
    Fsim,
    /// The cycle-accurate Verilator simulator (its model is built on first use)
    Rtl,
}

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free one. The bound address is printed on stderr
    /// at start. An address other hosts can reach needs a token
    #[arg(long, default_value = "127.0.0.1:9091", value_name = "HOST:PORT")]
    listen: String,
    /// Device to serve
    #[arg(long, value_enum, default_value = "fsim")]
    device: Served,
    #[arg(long, value_name = "FILE|PRESET", help = super::CONFIG_HELP)]
    config: Option<String>,
    /// Shared secret every client must present (clients set VTA_REMOTE_TOKEN to it)
    /// [default: $VTA_REMOTE_TOKEN, else none, which only a loopback address allows]
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// MiB of uploaded data kept, so data a client sends again (a model's weights) is not
    /// sent again
    #[arg(long, value_name = "MIB", default_value = "256")]
    cache_mib: u64,
    /// Clients served at once (their requests take turns on the device)
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_clients: u32,
    /// Clients beyond --max-clients that wait, first come first served, for one to finish;
    /// more are refused with "server busy" (which clients retry with backoff for a minute)
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(0..=65536))]
    max_waiting: u32,
    /// Longest wait in that queue, in seconds
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86400))]
    queue_timeout: u64,
    #[command(flatten)]
    rtl: RtlArgs,
}

/// The machine's name, for the welcome.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "vta".into())
}

pub fn run(a: ServeArgs) -> Result<String> {
    let backend = match a.device {
        Served::Fsim => Backend::Fsim,
        Served::Rtl => Backend::Rtl,
    };
    a.rtl.refuse_unless_rtl(&backend, &[])?;
    let token = match a.token {
        Some(t) => t,
        None => std::env::var(TOKEN_ENV).unwrap_or_default(),
    };
    let addrs: Vec<SocketAddr> = a
        .listen
        .to_socket_addrs()
        .with_context(|| format!("--listen {}: expected HOST:PORT", a.listen))?
        .collect();
    if token.is_empty() {
        if let Some(open) = addrs.iter().find(|s| !s.ip().is_loopback()) {
            bail!(
                "--listen {}: {open} is reachable from other hosts, so clients must present a \
                 token: give --token or set {TOKEN_ENV}",
                a.listen
            );
        }
    }
    let cfg = super::load_config(a.config.as_deref())?;
    let mut fsim: Option<FsimDevice> = None;
    let mut rtl = None;
    let device: &mut dyn Device = match a.device {
        Served::Fsim => fsim.insert(FsimDevice::new(&cfg)),
        Served::Rtl => rtl.insert(a.rtl.device(&cfg, false)?),
    };
    let listener = TcpListener::bind(addrs.as_slice())
        .with_context(|| format!("cannot listen on {}", a.listen))?;
    let bound = listener
        .local_addr()
        .with_context(|| format!("cannot listen on {}", a.listen))?;
    let opts = ServeOptions {
        token,
        server_id: host_name(),
        cache_bytes: a
            .cache_mib
            .checked_mul(1 << 20)
            .ok_or_else(|| anyhow!("--cache-mib {} is too large", a.cache_mib))?,
        max_clients: a.max_clients as usize,
        max_waiting: a.max_waiting as usize,
        queue_timeout: std::time::Duration::from_secs(a.queue_timeout),
        log: Some(Arc::new(|line: &str| eprintln!("vta serve: {line}"))),
        ..ServeOptions::default()
    };
    eprintln!(
        "vta serve: listening on {bound} ({}, {}, {})",
        device.name(),
        cfg.config_string(),
        if opts.token.is_empty() {
            "no token"
        } else {
            "token required"
        }
    );
    serve(listener, device, opts).with_context(|| format!("serving on {bound} failed"))?;
    Ok(String::new())
}
