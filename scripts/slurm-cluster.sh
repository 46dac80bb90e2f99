# Sourced by the Slurm scripts (slurm-check.sh, bench-slurm-sweep.sh): installs Debian's
# slurmctld, slurmd, slurm-client and munge if missing, and starts a one-node cluster as root
# (no systemd) in a fresh temporary directory `$work`: munged with a key and socket of its own,
# a generated slurm.conf on loopback (SLURM_CONF exported), one partition `check` with this
# machine's cores. Everything it started is killed and `$work` removed on exit.
# Set `slurm_tag` (the prefix of its messages) before sourcing.
need=()
for tool in slurmctld slurmd sbatch munged; do
    command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "$slurm_tag: installing slurmctld, slurmd, slurm-client and munge (missing: ${need[*]})" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        slurmctld slurmd slurm-client munge >/dev/null
fi
if [ "$(id -u)" != 0 ]; then
    echo "$slurm_tag: the one-node cluster runs its daemons as root; run as root" >&2
    exit 1
fi

work=$(mktemp -d /tmp/vta-slurm.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    pkill -f "$work/" 2>/dev/null || true
    sleep 1
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work"/{state,spool,log,munge}

# munge with a key and socket of its own, so a host's munge is left alone.
dd if=/dev/urandom bs=1 count=1024 of="$work/munge/munge.key" 2>/dev/null
chmod 400 "$work/munge/munge.key"
chmod 700 "$work/munge"
munged --force --key-file="$work/munge/munge.key" --socket="$work/munge/munge.sock" \
    --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" \
    --seed-file="$work/munge/munged.seed"
pids+=("$(cat "$work/munge/munged.pid")")

host=$(hostname -s)
mem=$(free -m | awk '/Mem:/ { print int($2 / 2) }')
cat >"$work/slurm.conf" <<EOF
ClusterName=vta
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
NodeName=$host CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=check Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$work/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
    sinfo -h -o %T 2>/dev/null | grep -q idle && break
    sleep 0.5
done
sinfo -h -o %T | grep -q idle || {
    echo "$slurm_tag: the node did not come up; logs:" >&2
    tail -n 20 "$work"/log/*.log >&2
    exit 1
}

