#!/usr/bin/env bash
# What was run on the GPU machine to verify cuda-doctor there (no package registry on it:
# cuda-doctor runs from this working tree; its python3 has torch, nvidia-ml-py, click, rich).
# Usage: OUT=/some/dir bash benchmarks/gpu_verify.sh [part…]   (parts: check fail bench watch nccl child libs jax multigpu)
set -u
export PYTHONPATH="$PWD" NCCL_NVLS_ENABLE=0
OUT="${OUT:-/tmp/cuda-doctor-verify}"; mkdir -p "$OUT"
python3 -m compileall -q cuda_doctor
doctor() { python3 -m cuda_doctor "$@"; }
parts="${*:-check fail bench watch nccl child}"
run() { local name=$1; shift; echo "== $name: $*" | tee -a "$OUT/log.txt"; ( "$@" ) >"$OUT/$name.txt" 2>&1; echo "   rc=$?" | tee -a "$OUT/log.txt"; }
for part in $parts; do case $part in
check)
  # The healthy H200 gives no warning and no failure: memory health (CD601, CD602, CD605, CD606)
  # passes with "GPU Recovery Action: None", and the wheel rules suggest nothing.
  run check-v doctor check -v
  run check-json doctor check --format json --save "$OUT/report.json"
  CUDA_VISIBLE_DEVICES=0 run check-1gpu-v doctor check -v
  run facts doctor facts --format json ;;
fail)
  CUDA_VISIBLE_DEVICES=7 run fail-cvd7 doctor check
  CUDA_VISIBLE_DEVICES=0,0 run fail-cvd-twice doctor check
  CUDA_DOCTOR_SMOKE_TEST_HANG="matmul bf16" CUDA_VISIBLE_DEVICES=0 run fail-hang doctor smoke --smoke-timeout 15
  python3 -m venv --without-pip /tmp/notorch && run smoke-notorch doctor smoke --python /tmp/notorch/bin/python -v
  run check-fast doctor check --fast ;;
bench)
  run bench-check-speed python3 benchmarks/check_speed.py --runs 5 --torch-python python3
  CUDA_VISIBLE_DEVICES=0 run bench-smoke-cost python3 benchmarks/smoke_cost.py --runs 2
  run bench-exec python3 benchmarks/exec_startup.py --runs 15
  run bench-nvml-fields python3 benchmarks/nvml_field_values.py ;;
watch)
  run watch-starved doctor watch -- python3 benchmarks/watch_scripts/starved.py
  run watch-gpu-bound doctor watch -- python3 benchmarks/watch_scripts/gpu_bound.py
  CUDA_VISIBLE_DEVICES=0,0 run watch-cvd-twice doctor watch -- python3 -c "import time; time.sleep(3)"
  run bench-watch python3 benchmarks/watch_overhead.py --seconds 10 ;;
nccl)
  run smoke-nccl doctor smoke --nccl -v
  CUDA_VISIBLE_DEVICES=0,0 run smoke-nccl-cvd-twice doctor smoke --nccl -v
  # One GPU with --nccl: one rank, a real NCCL init and all-reduce. Expected: CD801 pass with
  # "a one-rank NCCL all-reduce … initialised NCCL", nccl.world_size 1, CD802/CD804/CD805 skipped.
  CUDA_VISIBLE_DEVICES=0 run check-nccl-1gpu-v doctor check --nccl -v
  CUDA_VISIBLE_DEVICES=0 run check-nccl-1gpu-json doctor check --nccl --format json --save "$OUT/nccl-1gpu.json"
  CUDA_VISIBLE_DEVICES=0 run smoke-nccl-1gpu doctor smoke --nccl -v
  python3 - "$OUT" > "$OUT/nccl-1gpu-summary.txt" 2>&1 <<'PY'
import json, sys
report = json.load(open(f"{sys.argv[1]}/nccl-1gpu.json"))
v = report["facts"]["values"]
for name in ("nccl.status", "nccl.world_size", "nccl.sum_ok", "nccl.version", "nccl.per_rank_init_seconds", "nccl.seconds"):
    print(f"{name} = {v.get(name)!r}")
for r in report["results"]:
    if r["rule"].startswith("CD8"):
        print(r["rule"], r["status"], r["message"])
print("expected: nccl.status 'ok', world_size 1, sum_ok True; CD801 pass; CD802/CD804/CD805 skipped")
PY
  cat "$OUT/nccl-1gpu-summary.txt" | tee -a "$OUT/log.txt" ;;
child)
  # One torch child per check: facts first, then (once the read-only probes are done) the smoke
  # steps in the same process.  A --python that logs each start of the target interpreter
  # counts the children: 2 expected (the torch child and the driver-level child), not 3.
  printf '#!/bin/sh\necho "$$ $(date +%%s.%%N)" >> %s/starts.log\nexec python3 "$@"\n' "$OUT" > "$OUT/counted-python"
  chmod +x "$OUT/counted-python"; rm -f "$OUT/starts.log"
  CUDA_VISIBLE_DEVICES=0 run child-check doctor check --format json --python "$OUT/counted-python" --save "$OUT/child.json"
  python3 - "$OUT" > "$OUT/child-summary.txt" 2>&1 <<'PY'
import json, sys
out = sys.argv[1]
v = json.load(open(f"{out}/child.json"))["facts"]["values"]
starts = open(f"{out}/starts.log").read().split("\n")
show = ["torch.import_seconds", "smoke.framework_level.import_seconds", "smoke.framework_level.status",
        "smoke.framework_level.seconds", "smoke.status", "gpu[0].process_count", "smoke[0].other_process_count",
        "probe.framework.seconds", "probe.smoke.seconds"]
print("interpreter starts:", len([s for s in starts if s]), "(expected 3: the torch child, the JAX child, the driver-level child)")
for name in show:
    print(f"{name} = {v.get(name)!r}")
print("expected: smoke.framework_level.import_seconds < 0.05 (torch imported already), both process counts 0")
for name in ["jax.import_seconds", "jax.backend_seconds", "probe.jax.seconds", "probe.jax_gpu.seconds", "smoke.jax_level.status"]:
    print(f"{name} = {v.get(name)!r}")
PY
  cat "$OUT/child-summary.txt" | tee -a "$OUT/log.txt"
  run bench-check-full python3 benchmarks/check_speed.py --runs 5 --torch-python python3 --full-only
  # An interpreter that never starts: the framework probe gives up after 10 s and no smoke run waits.
  printf '#!/bin/sh\nexec sleep 600\n' > "$OUT/sleeping-python"; chmod +x "$OUT/sleeping-python"
  run child-nostart bash -c "time python3 -m cuda_doctor check --python $OUT/sleeping-python"
  # Ctrl-C while that probe waits: exit 130, one line, no orphan left (the ps line must be empty).
  run child-sigint bash -c "timeout --preserve-status -s INT 3 python3 -m cuda_doctor check --python $OUT/sleeping-python; echo rc=\$?; sleep 1; ps -eo pid,ppid,pgid,args | grep '[s]leep 600' || echo 'no orphan'" ;;
libs)
  # What loads: `check -v` lists every CUDA library the torch process mapped, with its path and
  # version (cudalib[i]); the healthy image gives no finding in the driver and library checks; an
  # older NCCL installed with --target onto PYTHONPATH is caught (CD212: the distribution, CD213:
  # the library that loaded); the fatbin scan's own cost; the --no-smoke timing pair.
  # Carry nvidia_nccl_cu13-2.28.3-py3-none-manylinux_2_18_x86_64.whl (PyPI; torch 2.11.0 pins
  # nvidia-nccl-cu13==2.28.9) into the working tree's root, or point NCCL_SHADOW_WHEEL at it.
  run libs-check-v doctor check -v --no-smoke
  run libs-check-json doctor check --no-smoke --format json --save "$OUT/libs.json"
  python3 - "$OUT/libs.json" > "$OUT/libs-summary.txt" 2>&1 <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
v = report["facts"]["values"]
i = 0
while f"cudalib[{i}].path" in v:
    print(f"{v[f'cudalib[{i}].file']:32} {str(v[f'cudalib[{i}].version']):12} {str(v[f'cudalib[{i}].version_source']):10} "
          f"{str(v[f'cudalib[{i}].distribution']):22} {v[f'cudalib[{i}].path']}")
    i += 1
print(f"{i} CUDA libraries mapped; {v.get('framework.distribution_count')} CUDA distributions; "
      f"fatbin: {v.get('fatbin.files_scanned')} shared objects, {len(v.get('fatbin.files') or [])} with device code or CUDA "
      f"linkage, {v.get('fatbin.seconds')} s, complete={v.get('fatbin.complete')}")
ours = [r for r in report["results"] if r["category"] in ("libraries", "driver")]
found = [r for r in ours if r["status"] not in ("pass", "skipped")]
print(f"driver and library checks: {len(ours)}, findings: {len(found)} (expected 0 on the healthy image)")
for r in found:
    print(f"  {r['status']} {r['rule']} {r.get('subject') or ''}: {r['message']}")
PY
  cat "$OUT/libs-summary.txt" | tee -a "$OUT/log.txt"
  wheel="${NCCL_SHADOW_WHEEL:-$(ls nvidia_nccl_cu13-2.28.3-*.whl 2>/dev/null | head -n 1)}"
  if [ -n "$wheel" ]; then
    rm -rf /tmp/nccl-shadow && python3 -m pip install -q --no-deps --no-index --target /tmp/nccl-shadow "$wheel"
    PYTHONPATH="$PWD:/tmp/nccl-shadow" run libs-shadow-v doctor check -v --no-smoke --select CD211,CD212,CD213
    PYTHONPATH="$PWD:/tmp/nccl-shadow" run libs-shadow-json doctor check --no-smoke --format json --select CD212,CD213 --save "$OUT/libs-shadow.json"
    python3 - "$OUT/libs-shadow.json" > "$OUT/libs-shadow-summary.txt" 2>&1 <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
caught = [r for r in results if r["status"] in ("warn", "fail") and "nccl" in str(r.get("subject"))]
for r in caught:
    print(f"{r['status']} {r['rule']} [{r['subject']}] {r['message']}")
    for command in r.get("commands", []):
        print(f"    $ {command}")
rules = {r["rule"] for r in caught}
print("CD212, the shadowing nvidia-nccl-cu13 distribution:", "caught" if "CD212" in rules else "NOT CAUGHT")
print("CD213, the shadow copy of libnccl.so.2 loaded by torch:", "caught" if "CD213" in rules else "not seen (did torch load the pinned copy? see libs-shadow-v.txt)")
PY
    cat "$OUT/libs-shadow-summary.txt" | tee -a "$OUT/log.txt"
  else
    echo "   no nvidia_nccl_cu13-2.28.3 wheel carried: the shadowing case did not run" | tee -a "$OUT/log.txt"
  fi
  run libs-fatbin-scan python3 benchmarks/fatbin_scan.py --python python3 --runs 3
  run libs-bench-no-smoke python3 benchmarks/check_speed.py --runs 5 --torch-python python3 --no-smoke-only ;;
jax)
  # JAX on the H200 image (jax 0.11.2 + jax-cuda13-plugin 0.11.2): `check -v` shows its facts and no
  # false problem (CD241-CD245 pass, CD246/CD247 pass or info, CD251/CD252 pass), `smoke -v` its
  # GPU backend and the JAX bf16 matmul figure; cuda-doctor's own JAX (XLA_PYTHON_CLIENT_PREALLOCATE
  # =false), whose backend comes up in phase 1 beside torch's import, is never counted as another
  # process on the GPU (gpu[0].process_count 0, smoke[0].other_process_count 0).  Then a JAX
  # process that holds the GPU with the default 75% preallocation: CD246 says how to share.
  # jax-timeline.txt: how long the JAX child's phases took and how much of it hid behind torch's.
  run jax-check-v doctor check -v
  run jax-check-json doctor check --format json --save "$OUT/jax.json"
  run jax-check-no-smoke-json doctor check --no-smoke --format json --save "$OUT/jax-no-smoke.json"
  python3 - "$OUT" > "$OUT/jax-timeline.txt" 2>&1 <<'PY'
import json, sys
out = sys.argv[1]
for name in ("jax.json", "jax-no-smoke.json"):
    try:
        v = json.load(open(f"{out}/{name}"))["facts"]["values"]
    except (OSError, ValueError) as exc:
        print(f"== {name}: unreadable ({exc})")
        continue
    g = lambda key: v.get(key) if isinstance(v.get(key), (int, float)) else float("nan")
    phase1 = max((g(f"probe.{p}.seconds") for p in ("gpu", "environment", "toolkit", "framework", "jax", "docker", "kernel")
                  if isinstance(v.get(f"probe.{p}.seconds"), (int, float))), default=float("nan"))
    fw, jx = g("probe.framework.seconds"), g("probe.jax.seconds")
    print(f"== {name}")
    print(f"  phase 1 {phase1:.2f} s: torch child {fw:.2f} s | JAX child {jx:.2f} s (import jax {g('jax.import_seconds'):.2f},"
          f" backend {g('jax.backend_seconds'):.2f}, compile {g('smoke[0].jax_compile_seconds'):.2f} on GPU 0)"
          f" -> JAX's phase 1 {'hidden behind torch' if jx <= fw else f'{jx - fw:.2f} s longer than torch'}")
    print(f"  phase 2: torch smoke {g('probe.smoke.seconds'):.2f} s, then JAX {g('probe.jax_gpu.seconds'):.2f} s"
          f" (the JAX step {g('smoke.jax_level.seconds'):.2f} s with its compile; status {v.get('smoke.jax_level.status')})")
    print(f"  gpu[0].process_count {v.get('gpu[0].process_count')!r}, smoke[0].other_process_count"
          f" {v.get('smoke[0].other_process_count')!r} (expected 0 and 0, or absent without a smoke run)")
    if name == "jax-no-smoke.json":
        jax_smoke = sorted(k for k in v if k.startswith("smoke"))
        print(f"  --no-smoke: JAX smoke facts {jax_smoke or 'none'} (expected none: no JAX smoke work)")
PY
  cat "$OUT/jax-timeline.txt" | tee -a "$OUT/log.txt"
  run jax-bench-check-speed python3 benchmarks/check_speed.py --runs 7 --torch-python python3
  run jax-smoke-v doctor smoke -v
  run jax-smoke-json doctor smoke --format json --save "$OUT/jax-smoke.json"
  XLA_PYTHON_CLIENT_PREALLOCATE=true XLA_FLAGS=--xla_gpu_autotune_level=2 run jax-user-settings doctor check --no-smoke --format json --save "$OUT/jax-user.json"
  python3 -c "import time, jax.numpy as jnp; jnp.ones((1024, 1024)).block_until_ready(); time.sleep(90)" > "$OUT/jax-holder.txt" 2>&1 &
  holder=$!; sleep 15
  CUDA_VISIBLE_DEVICES=0 run jax-shared doctor check --no-smoke --format json --save "$OUT/jax-shared.json"
  kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
  python3 - "$OUT" > "$OUT/jax-summary.txt" 2>&1 <<'PY'
import json, sys
out = sys.argv[1]
for name in ("jax.json", "jax-smoke.json", "jax-user.json", "jax-shared.json"):
    try:
        report = json.load(open(f"{out}/{name}"))
    except (OSError, ValueError) as exc:
        print(f"== {name}: unreadable ({exc})")
        continue
    v = report["facts"]["values"]
    print(f"== {name}")
    for key in ("jax.version", "jax.jaxlib_version", "jax.cuda_plugin", "jax.cuda_plugin_version", "jax.cuda_pjrt_version",
                "jax.plugin_build", "jax.import_seconds", "jax.backend", "jax.platforms", "jax.devices", "jax.gpu_count",
                "jax.cuda_error", "jax.backend_messages", "jax.backend_seconds", "jax.cuda_components", "jax.driver_cuda",
                "jax.env", "probe.jax.seconds", "probe.jax_gpu.seconds", "gpu[0].process_count", "gpu[0].processes",
                "smoke.jax_level.status", "smoke.jax_level.error", "smoke.jax_level.seconds"):
        if key in v:
            print(f"  {key} = {json.dumps(v[key])}")
    for lib in v.get("jax.loaded_libraries") or []:
        print(f"  loaded {lib['library']:8} {str(lib['version']):12} {str(lib['distribution']):22} {lib['path']}")
    i = 0
    while f"smoke[{i}].jax_bf16_tflops" in v or f"smoke[{i}].jax_error" in v:
        print(f"  smoke[{i}] jax bf16 {v.get(f'smoke[{i}].jax_bf16_tflops')} TFLOP/s, rel err {v.get(f'smoke[{i}].jax_bf16_rel_err')}, "
              f"compile {v.get(f'smoke[{i}].jax_compile_seconds')} s, error {v.get(f'smoke[{i}].jax_error')}, "
              f"torch bf16 {v.get(f'smoke[{i}].bf16_tflops')}")
        i += 1
    for r in report["results"]:
        if r["rule"].startswith(("CD24", "CD25")) or (r["rule"] == "CD604" and r["status"] != "pass"):
            print(f"  {r['rule']} {r['status']:7} {r.get('subject') or ''} {r['message']}")
            for command in r.get("commands") or []:
                print(f"      $ {command}")
print("expected: jax.json and jax-smoke.json without a JAX fail or warn; jax-user.json jax.env with both variables;"
      " jax-shared.json CD246 info with one other process and the two exports")
PY
  cat "$OUT/jax-summary.txt" | tee -a "$OUT/log.txt" ;;
multigpu)
  # However many GPUs the machine has (one H200 alone, eight on an HGX node): the fabric and NVLink
  # facts as NVML gives them, the checks on them (CD103, CD806, CD807), check -v, smoke --nccl -v,
  # the fast check's ratio and its cost per GPU.  Expected on one H200 alone: fabric N/A and
  # NVLink NOT_SUPPORTED, so CD103, CD806 and CD807 skipped, and CD802/CD804/CD805 skipped (one
  # rank).  Expected on an HGX node with Fabric Manager running: every GPU's fabric "completed",
  # 18 of 18 links up, CD103/CD806/CD807/CD801/CD802/CD804/CD805 pass, busbw at 256 MiB above
  # 185 GB/s (half of the published 370 GB/s, NVLS off), check --fast within 1.3x its reference.
  run multigpu-check-v doctor check -v
  run multigpu-check-json doctor check --format json --save "$OUT/multigpu.json"
  run multigpu-fast-json doctor check --fast --format json --save "$OUT/multigpu-fast.json"
  run multigpu-smoke-nccl-v doctor smoke --nccl -v
  run multigpu-smoke-nccl-json doctor smoke --nccl --format json --save "$OUT/multigpu-nccl.json"
  run multigpu-smi-fabric bash -c "nvidia-smi -q | sed -n '/^GPU /p;/Fabric$/,/Partition Assigned/p'"
  run multigpu-smi-nvlink bash -c "nvidia-smi nvlink -s; nvidia-smi nvlink -e; nvidia-smi topo -m"
  run multigpu-fast-speed python3 benchmarks/check_speed.py --runs 10 --fast-only
  run multigpu-nvml-per-gpu python3 benchmarks/nvml_per_gpu.py --rounds 5
  python3 - "$OUT" > "$OUT/multigpu-summary.txt" 2>&1 <<'PY'
import json, sys
out = sys.argv[1]
for name in ("multigpu-fast.json", "multigpu.json", "multigpu-nccl.json"):
    try:
        report = json.load(open(f"{out}/{name}"))
    except (OSError, ValueError) as exc:
        print(f"== {name}: unreadable ({exc})")
        continue
    v, unknown = report["facts"]["values"], report["facts"].get("unknown", {})
    print(f"== {name}: gpu.count {v.get('gpu.count')}, probe.gpu.seconds {v.get('probe.gpu.seconds')}")
    i = 0
    while f"gpu[{i}].index" in v:
        states = v.get(f"gpu[{i}].nvlink_states")
        shown = {s: states.count(s) for s in sorted(set(states))} if isinstance(states, list) else unknown.get(f"gpu[{i}].nvlink_states")
        print(f"  gpu[{i}] {v.get(f'gpu[{i}].name')}: fabric {v.get(f'gpu[{i}].fabric_state')!r} status {v.get(f'gpu[{i}].fabric_status')!r}"
              f" | nvlink_count {v.get(f'gpu[{i}].nvlink_count', unknown.get(f'gpu[{i}].nvlink_count'))!r} states {shown}"
              f" | errors {v.get(f'gpu[{i}].nvlink_errors', unknown.get(f'gpu[{i}].nvlink_errors'))!r}")
        i += 1
    for key in ("nccl.status", "nccl.world_size", "nccl.nvls_enable", "nccl.version", "nccl.busbw_gbps", "nccl.busbw_peak_gbps",
                "nccl.link_types", "nccl.p2p", "nccl.per_rank_seconds", "derived.nccl.expected_busbw_gbps", "derived.outliers.found"):
        if key in v:
            print(f"  {key} = {json.dumps(v[key])}")
    for r in report["results"]:
        if r["rule"] in ("CD103", "CD801", "CD802", "CD804", "CD805", "CD806", "CD807"):
            print(f"  {r['rule']} {r['status']:7} {r['message']}")
            for command in r.get("commands") or []:
                print(f"      $ {command}")
print("expected: see the multigpu part of benchmarks/gpu_verify.sh (one H200 alone: CD103/CD806/CD807 skipped)")
PY
  cat "$OUT/multigpu-summary.txt" | tee -a "$OUT/log.txt"
  grep -E "ratio|marginal|round trips" "$OUT/multigpu-fast-speed.txt" "$OUT/multigpu-nvml-per-gpu.txt" | tee -a "$OUT/log.txt"
  grep -E "differ" "$OUT/multigpu-nvml-per-gpu.txt" | tee -a "$OUT/log.txt" ;;
esac; done
