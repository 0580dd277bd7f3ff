#!/usr/bin/env bash
# Start a private Docker engine for the container tests and print the DOCKER_HOST to export.
#
# Debian's docker.io is installed when dockerd is absent.  The engine uses the vfs storage
# driver, no iptables and no bridge (nothing here needs networking), and a private socket,
# data root and exec root under $CUDA_DOCTOR_CI_DIR, so it never touches a system engine.
# Needs root.  Idempotent: an engine already answering on the socket is reused.
set -euo pipefail

dir="${CUDA_DOCTOR_CI_DIR:-/tmp/cuda-doctor-ci}"
sock="$dir/docker.sock"
host="unix://$sock"
wait_s="${CUDA_DOCTOR_DOCKERD_WAIT:-60}"

log() { echo "start-dockerd: $*" >&2; }

if [ "$(id -u)" != "0" ]; then
    log "needs root to start dockerd"
    exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
    log "installing docker.io (dockerd not found)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y --no-install-recommends docker.io >&2
fi

# A static busybox lets the tests run a shell inside an image imported from a tarball.
if ! command -v busybox >/dev/null 2>&1; then
    log "installing busybox-static (used by the container tests)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends busybox-static >&2 \
        || { apt-get update >&2 && apt-get install -y --no-install-recommends busybox-static >&2; } \
        || log "busybox-static could not be installed; tests that run a shell in an image will skip"
fi

# Any docker CLI will do; Debian's docker.io brings one.
docker_cli="$(command -v docker || true)"
if [ -z "$docker_cli" ]; then
    log "no docker CLI found after installing docker.io"
    exit 1
fi

answers() { timeout 5 "$docker_cli" -H "$host" info >/dev/null 2>&1; }

mkdir -p "$dir"
if [ -S "$sock" ] && answers; then
    log "engine already running on $host"
    echo "export DOCKER_HOST=$host"
    exit 0
fi

# A stale pid file or socket from an earlier run would stop dockerd from starting.
if [ -f "$dir/docker.pid" ]; then
    old="$(cat "$dir/docker.pid" 2>/dev/null || true)"
    if [ -n "$old" ] && kill -0 "$old" 2>/dev/null; then
        log "dockerd pid $old is running but not answering; stopping it"
        kill "$old" || true
        sleep 2
    fi
    rm -f "$dir/docker.pid"
fi
rm -f "$sock"

log "starting dockerd on $host (log: $dir/dockerd.log)"
nohup dockerd \
    --storage-driver=vfs \
    --iptables=false \
    --ip6tables=false \
    --bridge=none \
    -H "$host" \
    --data-root "$dir/docker-data" \
    --exec-root "$dir/exec" \
    --pidfile "$dir/docker.pid" \
    >"$dir/dockerd.log" 2>&1 </dev/null &

deadline=$((SECONDS + wait_s))
until answers; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        log "dockerd did not answer within ${wait_s} s; last log lines:"
        tail -n 20 "$dir/dockerd.log" >&2 || true
        exit 1
    fi
    sleep 0.5
done
log "engine ready"
echo "export DOCKER_HOST=$host"
