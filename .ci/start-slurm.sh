#!/usr/bin/env bash
# Start a one-host Slurm cluster (munged, slurmctld, slurmd) for the slurm-marked tests and
# print the SLURM_CONF to export.
#
# Debian's slurm-wlm and munge are installed when absent.  Everything lives under one folder
# ($CUDA_DOCTOR_SLURM_DIR, default $CUDA_DOCTOR_CI_DIR/slurm): its own munge key and socket,
# slurm.conf, state, spool, pid and log files; slurmctld and slurmd listen on unprivileged
# ports ($CUDA_DOCTOR_SLURM_PORT and the next one), so a system Slurm or munge is never used.
# The one node is named as `hostname -s`.  Its Prolog runs the executables a test puts in
# prolog.d (none by default), so that a test can try a prolog without changing slurm.conf.  Its CPU count is configured, not detected
# (config_overrides), so that a test can start more tasks than this machine has cores.
# Needs root.  Idempotent: a cluster already answering with this slurm.conf is reused.
# `start-slurm.sh stop` stops the daemons this folder's pid files name.
set -euo pipefail

dir="${CUDA_DOCTOR_SLURM_DIR:-${CUDA_DOCTOR_CI_DIR:-/tmp/cuda-doctor-ci}/slurm}"
port="${CUDA_DOCTOR_SLURM_PORT:-16817}"
cpus="${CUDA_DOCTOR_SLURM_CPUS:-8}"
wait_s="${CUDA_DOCTOR_SLURM_WAIT:-60}"
conf="$dir/slurm.conf"
node="$(hostname -s)"

log() { echo "start-slurm: $*" >&2; }

# A pid file's process, if it still runs the daemon named ($2); a reused pid is not ours.
running_pid() {
    local pid
    pid="$(cat "$1" 2>/dev/null || true)"
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$2" \
        && echo "$pid"
}

stop_daemons() {
    local name pid
    for name in slurmd slurmctld munged; do
        pid="$(running_pid "$dir/$name.pid" "$name" || true)"
        if [ -n "$pid" ]; then
            log "stopping $name (pid $pid)"
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$dir/$name.pid"
    done
}

if [ "$(id -u)" != "0" ]; then
    log "needs root to start munged, slurmctld and slurmd"
    exit 1
fi

if [ "${1:-}" = "stop" ]; then
    stop_daemons
    exit 0
fi

missing=""
for cmd in munged slurmctld slurmd srun scontrol sinfo; do
    command -v "$cmd" >/dev/null 2>&1 || missing="$missing $cmd"
done
if [ -n "$missing" ]; then
    log "installing slurm-wlm and munge (not found:$missing)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends slurm-wlm munge >&2 \
        || { apt-get update >&2 && apt-get install -y --no-install-recommends slurm-wlm munge >&2; }
fi

answers() {
    SLURM_CONF="$conf" timeout 5 scontrol ping 2>/dev/null | grep -q "is UP" \
        && SLURM_CONF="$conf" timeout 5 sinfo -h -n "$node" -o %T 2>/dev/null | grep -qv "not_responding\|down\|unknown"
}

if [ -f "$conf" ] && answers; then
    log "cluster already running ($conf)"
    echo "export SLURM_CONF=$conf"
    exit 0
fi

stop_daemons
mkdir -p "$dir"
chmod 0755 "$dir"
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chmod 0700 "$dir/munge"
rm -rf "${dir:?}/state/"* "${dir:?}/spool/"*

# munged insists on a private key file and socket folder owned by the user it runs as
if [ ! -s "$dir/munge/munge.key" ]; then
    (umask 077 && head -c 1024 /dev/urandom >"$dir/munge/munge.key")
fi
sock="$dir/munge/munge.socket"
munged --force --key-file="$dir/munge/munge.key" --socket="$sock" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munge/munged.seed" >&2

mkdir -p "$dir/prolog.d"
cat >"$dir/prolog.tmp" <<EOF
#!/bin/sh
# Prolog of the test cluster: the executables in $dir/prolog.d, in order; none by default.
for hook in "$dir/prolog.d/"*; do
    [ -x "\$hook" ] || continue
    "\$hook" || exit \$?
done
exit 0
EOF
chmod 0755 "$dir/prolog.tmp"
mv "$dir/prolog.tmp" "$dir/prolog"

cat >"$conf.tmp" <<EOF
# one-host cluster for cuda-doctor's slurm-marked tests (written by .ci/start-slurm.sh)
ClusterName=cuda-doctor-ci
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
Prolog=$dir/prolog
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=10
InactiveLimit=0
KillWait=5
MinJobAge=10
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
mv "$conf.tmp" "$conf"

log "starting slurmctld and slurmd (logs: $dir/slurmctld.log, $dir/slurmd.log)"
slurmctld -c -f "$conf" >&2
slurmd -f "$conf" >&2

deadline=$((SECONDS + wait_s))
until answers; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        log "the cluster did not come up within ${wait_s} s; last log lines:"
        tail -n 10 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
        exit 1
    fi
    sleep 0.5
done
log "cluster ready: node $node is $(SLURM_CONF="$conf" sinfo -h -n "$node" -o %T)"
echo "export SLURM_CONF=$conf"
