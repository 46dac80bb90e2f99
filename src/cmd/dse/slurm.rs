//! `vta dse --slurm N`: the sweep submitted to a Slurm cluster as an array job of N shards
//! (each task finds its shard in `SLURM_ARRAY_TASK_ID`) and a merge job that runs after every
//! task has ended, whatever their exit, so that it names the configs of a failed task with the
//! command that reruns it. The tasks share the result cache, which must sit on a filesystem
//! every node sees (`--cache` or `VTA_CACHE_DIR`).

use std::path::Path;
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;

#[derive(Args, Default)]
pub struct SlurmArgs {
    /// Submit the sweep to Slurm as N array tasks (`sbatch --array`) and a merge job after
    /// them, which writes the results; prints the job ids and the log files
    #[arg(long = "slurm", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub shards: Option<u32>,
    /// Slurm partition of both jobs [default: the cluster's]
    #[arg(long, value_name = "P", requires = "shards")]
    partition: Option<String>,
    /// Time limit of each task and of the merge, in Slurm's forms (`30`, `2:00:00`)
    #[arg(long, value_name = "T", requires = "shards")]
    time: Option<String>,
    /// At most K array tasks running at once (`--array=0-(N-1)%K`)
    #[arg(long, value_name = "K", requires = "shards", value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_running: Option<u32>,
    /// Wait until the merge has run, then print its report (or its error)
    #[arg(long, requires = "shards")]
    wait: bool,
}

/// `text` as one word for `sh`.
fn quoted(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+%@".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Runs `sbatch` with `args`; its job id (`--parsable`).
fn sbatch(args: &[String]) -> Result<String> {
    let out = Command::new("sbatch")
        .arg("--parsable")
        .args(args)
        .output()
        .map_err(|e| {
            anyhow!(
                "cannot run sbatch ({e}): --slurm submits to a Slurm cluster from a machine with \
                 Slurm's client (Debian: slurm-client); without one, run the shards with \
                 `--shard I/N` and then `--merge N`"
            )
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "sbatch failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // `JOBID` or `JOBID;CLUSTER`.
    let id = stdout
        .trim()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string();
    if id.is_empty() {
        bail!("sbatch printed no job id");
    }
    Ok(id)
}

pub fn submit(a: &SlurmArgs, shards: usize, sweep: &[String], out_dir: &Path) -> Result<String> {
    let vta = std::env::current_exe().context("cannot find this vta executable")?;
    let logs = out_dir.join("slurm-logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let command = |extra: &[String]| {
        std::iter::once(vta.display().to_string())
            .chain(sweep.iter().cloned())
            .chain(extra.iter().cloned())
            .map(|w| quoted(&w))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut common = Vec::new();
    if let Some(p) = &a.partition {
        common.push(format!("--partition={p}"));
    }
    if let Some(t) = &a.time {
        common.push(format!("--time={t}"));
    }
    let array = match a.max_running {
        Some(k) => format!("--array=0-{}%{k}", shards - 1),
        None => format!("--array=0-{}", shards - 1),
    };
    let shard_log = logs.join("shard-%a.log");
    let mut args = common.clone();
    args.extend([
        array,
        "--job-name=vta-dse".into(),
        format!("--output={}", shard_log.display()),
        format!("--wrap={}", command(&[])),
    ]);
    let tasks = sbatch(&args)?;
    let merge_log = logs.join("merge.log");
    let mut args = common;
    args.extend([
        // After every task, failed or not: the merge names what is missing.
        format!("--dependency=afterany:{tasks}"),
        "--job-name=vta-dse-merge".into(),
        format!("--output={}", merge_log.display()),
        format!(
            "--wrap={}",
            command(&["--merge".into(), shards.to_string()])
        ),
    ]);
    if a.wait {
        args.push("--wait".into());
    }
    let merge = sbatch(&args);
    let submitted = format!(
        "submitted the sweep as Slurm job {tasks} ({shards} array tasks, logs {}) and its merge \
         as job {} (after every task; log {}); the results go to {}\n",
        shard_log.display(),
        merge.as_deref().unwrap_or("?"),
        merge_log.display(),
        out_dir.display()
    );
    if !a.wait {
        let merge = merge?;
        return Ok(format!(
            "{submitted}follow them with `squeue -j {tasks},{merge}`\n"
        ));
    }
    let log = std::fs::read_to_string(&merge_log).unwrap_or_default();
    match merge {
        Ok(_) => Ok(format!("{submitted}{log}")),
        Err(e) => bail!(
            "{submitted}the merge did not complete ({e}); its log {}:\n{log}",
            merge_log.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn words_are_quoted_for_the_shell_only_when_needed() {
        assert_eq!(quoted("--wgt-width"), "--wgt-width");
        assert_eq!(quoted("4,8"), "4,8");
        assert_eq!(quoted("my file"), "'my file'");
        assert_eq!(quoted("it's"), r"'it'\''s'");
        assert_eq!(quoted(""), "''");
    }
}
