"""Framework-level smoke test, run by the target interpreter: torch on every visible GPU, checked
and timed, step by step (one broken step does not stop the others).  With ``pynvml``, the PCIe
link and clocks are read while the GPU is busy.  CONFIG: ``{"size": 4096, "ours": [pids],
"cuda_start_error": how CUDA failed to start earlier in this
process, if it did}``; a step that fails prints ``{"failure": …}`` at once."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from typing import Any

from cuda_doctor.base.childside.allocator import check_settings, rejection
from cuda_doctor.base.childside.clocks import CLOCK_EVENT_REASONS
from cuda_doctor.base.childside.script import emit, error_text, script_main, step

#: Each timed copy: large enough for full speed, small enough to pin quickly.
COPY_BYTES = 128 * 1024 * 1024
REFERENCE_ROWS = 256  # the float64 reference covers this many rows of the product
#: Relative error allowed against the float64 product of the same inputs; fp32 leaves room for TF32.
TOLERANCE = {"fp32": 5e-3, "fp16": 1e-2, "bf16": 5e-2}
CONV_TOLERANCE = 1e-2  # cuDNN may use TF32 for fp32 convolutions by default
#: NVML's readings of the PCIe link, taken while the pinned copies run.
LINK_READINGS = {
    "pcie_gen_under_load": "nvmlDeviceGetCurrPcieLinkGeneration",
    "pcie_width_under_load": "nvmlDeviceGetCurrPcieLinkWidth",
    "pcie_gen_max": "nvmlDeviceGetMaxPcieLinkGeneration",
    "pcie_width_max": "nvmlDeviceGetMaxPcieLinkWidth",
}
#: NVML's readings while the matmuls run, turned into the device's figures by ``Nvml.busy``.
BUSY_READINGS = {
    "reasons": "nvmlDeviceGetCurrentClocksEventReasons",
    "power_mw": "nvmlDeviceGetPowerUsage",
    "limit_mw": "nvmlDeviceGetEnforcedPowerLimit",
    "default_mw": "nvmlDeviceGetPowerManagementDefaultLimit",
    "temperature_c": "nvmlDeviceGetTemperature",
}
WATTS = {"power_mw": "power_w_under_load", "limit_mw": "power_limit_w", "default_mw": "power_default_limit_w"}


class Nvml:
    """Optional NVML reads under load; every failure is kept as a reason, never raised."""

    def __init__(self, ours: Any = ()) -> None:
        self.module: Any = None
        self.error: str | None = None
        # cuda-doctor's own processes are not "another process on the GPU"
        self.ours = {os.getpid(), *(int(pid) for pid in ours if isinstance(pid, int))}
        try:
            import pynvml

            pynvml.nvmlInit()
            self.module = pynvml
        except Exception as exc:
            self.error = f"NVML is not available to the target interpreter: {error_text(exc)}"

    def handle(self, uuid: str | None) -> Any:
        if self.module is None or not uuid:
            return None
        try:
            return self.module.nvmlDeviceGetHandleByUUID(uuid)
        except Exception as exc:
            self.error = f"NVML has no GPU {uuid}: {error_text(exc)}"
            return None

    def read(self, handle: Any, out: dict[str, Any], names: dict[str, str]) -> None:
        for key, function in names.items():
            try:
                # nvmlDeviceGetTemperature also takes the sensor: 0 is the GPU die
                args = (handle, 0) if function == "nvmlDeviceGetTemperature" else (handle,)
                out[key] = getattr(self.module, function)(*args)
            except Exception as exc:
                out.setdefault("nvml_errors", {})[key] = error_text(exc)

    def busy(self, handle: Any, out: dict[str, Any]) -> None:
        raw: dict[str, Any] = {}
        self.read(handle, raw, BUSY_READINGS)
        errors = raw.pop("nvml_errors", {})
        if "reasons" not in raw:  # drivers before the rename only have the Throttle name
            self.read(handle, raw, {"reasons": "nvmlDeviceGetCurrentClocksThrottleReasons"})
            if "reasons" in raw:
                errors.pop("reasons", None)
        if "reasons" in raw:
            mask = int(raw["reasons"])
            out["clock_event_reasons_under_load"] = mask
            out["clock_event_reason_names_under_load"] = [
                name for bit, name in sorted(CLOCK_EVENT_REASONS.items()) if mask & bit
            ]
        for key, name in WATTS.items():
            if key in raw:
                out[name] = round(raw[key] / 1000.0, 1)
        if "temperature_c" in raw:
            out["temperature_c_under_load"] = int(raw["temperature_c"])
        if errors:
            out.setdefault("nvml_errors", {}).update(errors)

    def others(self, handle: Any, out: dict[str, Any]) -> None:
        try:
            procs = self.module.nvmlDeviceGetComputeRunningProcesses(handle)
        except Exception as exc:
            out.setdefault("nvml_errors", {})["processes"] = error_text(exc)
            return
        others = [p for p in procs if int(p.pid) not in self.ours]
        out["other_process_count"] = len(others)
        used = [getattr(p, "usedGpuMemory", None) for p in others]
        out["other_process_mib"] = round(sum(u for u in used if isinstance(u, int)) / 2**20)


def failed_now(label: str, error: str) -> None:
    """Say a failure at once: a later step may crash the process before the result is printed."""
    emit({"failure": {"step": label, "error": error}})


def refused(result: dict[str, Any], error: str) -> dict[str, Any]:
    """The run ends at "cuda init" without touching CUDA: ``error`` says why."""
    result.update(error=error, error_step="cuda init")
    failed_now("cuda init", error)
    return result


class PlainSGD:
    """Just enough of an optimizer for GradScaler.step(): torch.optim imports torch._dynamo, which is slow."""

    def __init__(self, torch: Any, params: Any, lr: float) -> None:
        self.torch = torch
        self.param_groups: list[dict[str, Any]] = [{"params": list(params), "lr": lr}]

    def step(self) -> None:
        with self.torch.no_grad():
            for group in self.param_groups:
                for param in group["params"]:
                    if param.grad is not None:
                        param.add_(param.grad, alpha=-group["lr"])


class Gpu:
    """The steps for one CUDA ordinal; results and errors go into ``self.out``."""

    def __init__(self, torch: Any, index: int, nvml: Nvml, size: int) -> None:
        self.torch = torch
        self.index = index
        self.nvml = nvml
        self.size = size
        self.device = torch.device("cuda", index)
        self.out: dict[str, Any] = {"index": index, "errors": [], "step_seconds": {}}
        self.handle: Any = None

    def attempt(self, name: str, action: Callable[[], None]) -> bool:
        label = f"{name} on GPU {self.index}"
        step(label)
        started = time.perf_counter()
        try:
            action()
            return True
        except Exception as exc:  # the error text *is* the finding
            self.out["errors"].append({"step": label, "error": error_text(exc)})
            failed_now(label, error_text(exc))
            return False
        finally:
            self.out["step_seconds"][name] = round(time.perf_counter() - started, 3)

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def allocate(self) -> None:
        torch = self.torch
        torch.cuda.set_device(self.index)
        props = torch.cuda.get_device_properties(self.index)
        self.out["name"] = props.name
        self.out["capability"] = f"{props.major}.{props.minor}"
        self.out["memory_total_mib"] = int(props.total_memory // 2**20)
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            text = str(uuid)
            self.out["uuid"] = text if text.startswith(("GPU-", "MIG-")) else "GPU-" + text
        block = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device=self.device)
        block.fill_(1.0)
        self.sync()
        self.out["alloc_ok"] = True
        self.handle = self.nvml.handle(self.out.get("uuid"))
        if self.handle is not None:
            self.nvml.others(self.handle, self.out)

    def copies(self, pinned: bool) -> None:
        torch = self.torch
        host = torch.empty(COPY_BYTES // 4, dtype=torch.float32, pin_memory=pinned)
        device = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device=self.device)
        device.copy_(host, non_blocking=pinned)  # warm-up: first touch, pinning, DMA setup
        self.sync()
        reps = 8 if pinned else 2
        kind = "pinned" if pinned else "pageable"
        self.out[f"h2d_{kind}_gbps"] = self.timed_copies(device, host, reps, pinned, read_link=pinned)
        if pinned:  # pageable device-to-host mostly times page faults on first touch
            self.out["d2h_pinned_gbps"] = self.timed_copies(host, device, reps, True, read_link=False)

    def timed_copies(self, target: Any, source: Any, reps: int, non_blocking: bool, read_link: bool) -> float:
        """GB/s of ``reps`` copies of ``source`` into ``target``."""
        start = time.perf_counter()
        for _ in range(reps):
            target.copy_(source, non_blocking=non_blocking)
        if read_link and self.handle is not None:
            self.nvml.read(self.handle, self.out, LINK_READINGS)  # while the copies are in flight
        self.sync()
        return round(reps * COPY_BYTES / (time.perf_counter() - start) / 1e9, 2)

    def matmul(self, label: str, dtype: Any) -> None:
        torch = self.torch
        n = self.size
        self.out[f"{label}_ok"] = False
        a = torch.randn(n, n, device=self.device, dtype=torch.float32).to(dtype)
        b = torch.randn(n, n, device=self.device, dtype=torch.float32).to(dtype)
        c = a @ b  # warm-up: library load, heuristics
        self.sync()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        c = a @ b
        end.record()
        end.synchronize()
        once = max(begin.elapsed_time(end) / 1000.0, 1e-6)
        reps = int(min(50, max(3, 0.04 / once)))  # about 40 ms of work per dtype
        begin.record()
        for _ in range(reps):
            c = a @ b
        end.record()
        first_look = label == "fp16" and "clock_event_reasons_under_load" not in self.out
        if self.handle is not None and (label == "bf16" or first_look):
            self.nvml.busy(self.handle, self.out)  # clocks and power while the matmuls run
        end.synchronize()
        seconds = begin.elapsed_time(end) / 1000.0 / reps
        self.out[f"{label}_tflops"] = round(2.0 * n**3 / seconds / 1e12, 2)
        rows = min(REFERENCE_ROWS, n)
        reference = a[:rows].double() @ b.double()
        got = c[:rows].double()
        finite = bool(torch.isfinite(got).all().item())
        error = float(((got - reference).norm() / reference.norm()).item()) if finite else None
        self.out[f"{label}_rel_err"] = error
        self.out[f"{label}_tolerance"] = TOLERANCE[label]
        self.out[f"{label}_ok"] = finite and error is not None and error <= TOLERANCE[label]

    def launch(self) -> None:
        torch = self.torch
        x = torch.zeros(1, device=self.device)
        for _ in range(50):
            x.add_(1.0)
        self.sync()
        reps = 1000
        start = time.perf_counter()
        for _ in range(reps):
            x.add_(1.0)
        self.sync()
        self.out["launch_us"] = round((time.perf_counter() - start) / reps * 1e6, 2)

    def amp_step(self) -> None:
        torch = self.torch
        self.out["amp_step_ok"] = False
        bf16 = self.out.get("bf16_native", False)
        dtype = torch.bfloat16 if bf16 else torch.float16
        self.out["amp_dtype"] = "bfloat16" if bf16 else "float16"
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(self.device)
        optimizer = PlainSGD(torch, model.parameters(), lr=0.1)
        before = [p.detach().clone() for p in model.parameters()]
        inputs = torch.randn(128, 64, device=self.device)
        target = torch.randint(0, 10, (128,), device=self.device)
        with torch.autocast("cuda", dtype=dtype):
            loss = torch.nn.functional.cross_entropy(model(inputs), target)
        # loss scaling is for float16's narrow range; bfloat16 has float32's and needs none (CD302)
        self.out["amp_grad_scaler"] = not bf16
        if bf16:
            loss.backward()
            optimizer.step()
        else:
            scaler = self.grad_scaler()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        self.sync()
        after = list(model.parameters())
        changed = any(not torch.equal(before[k], after[k]) for k in range(len(after)))
        finite = bool(torch.isfinite(loss.float()).item())
        self.out["amp_loss"] = float(loss.float().item()) if finite else None
        self.out["amp_step_ok"] = finite and changed
        if not changed:
            self.out["amp_problem"] = "the optimizer step left every parameter unchanged"

    def grad_scaler(self) -> Any:
        amp = getattr(self.torch, "amp", None)
        if amp is not None and hasattr(amp, "GradScaler"):
            return amp.GradScaler("cuda")
        return self.torch.cuda.amp.GradScaler()  # torch < 2.3

    def conv(self) -> None:
        torch = self.torch
        self.out["conv_ok"] = False
        self.out["cudnn_enabled"] = bool(torch.backends.cudnn.enabled)
        self.out["cudnn_version"] = torch.backends.cudnn.version()
        torch.manual_seed(0)
        conv = torch.nn.Conv2d(3, 16, 3, padding=1).to(self.device)
        x = torch.randn(8, 3, 64, 64, device=self.device)
        y = conv(x)
        self.sync()
        weight, bias = (param.detach().cpu().double() for param in (conv.weight, conv.bias))
        ref = torch.nn.functional.conv2d(x.cpu().double(), weight, bias, padding=1)
        error = float(((y.detach().cpu().double() - ref).norm() / ref.norm()).item())
        self.out["conv_rel_err"] = error
        self.out["conv_ok"] = error <= CONV_TOLERANCE

    def run(self) -> dict[str, Any]:
        torch = self.torch
        if not self.attempt("allocate", self.allocate):
            return self.out  # nothing else can work without memory on the device
        major = int(self.out["capability"].split(".")[0])
        self.out["bf16_native"] = major >= 8  # is_bf16_supported() may report emulation
        self.attempt("h2d pageable", lambda: self.copies(pinned=False))
        self.attempt("matmul fp32", lambda: self.matmul("fp32", torch.float32))
        self.attempt("matmul fp16", lambda: self.matmul("fp16", torch.float16))
        if self.out["bf16_native"]:
            self.attempt("matmul bf16", lambda: self.matmul("bf16", torch.bfloat16))
        # late in the run: the JAX child before it has torn its contexts down, the DMA engines are ours
        self.attempt("h2d pinned", lambda: self.copies(pinned=True))
        self.attempt("launch latency", self.launch)
        self.attempt("amp step", self.amp_step)
        self.attempt("conv2d cudnn", self.conv)
        checks = [self.out[f"{d}_ok"] for d in ("fp32", "fp16", "bf16") if f"{d}_ok" in self.out]
        self.out["matmul_ok"] = bool(checks) and all(checks)
        step(f"release GPU {self.index}")
        try:
            torch.cuda.empty_cache()
        except Exception as exc:
            self.out["errors"].append({"step": f"release GPU {self.index}", "error": error_text(exc)})
        return self.out


def run(config: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"status": "failed", "error": None, "devices": []}
    step("import torch")
    started = time.perf_counter()
    try:
        import torch
    except ImportError as exc:
        result.update(status="no_torch", error=error_text(exc))
        return result
    result["import_seconds"] = round(time.perf_counter() - started, 3)
    result["torch_version"] = str(torch.__version__)
    result["cuda_build"] = getattr(torch.version, "cuda", None)
    step("cuda init")
    # torch raises at CUDA's start for allocator settings it rejects, and a second start after a
    # failed one can crash the process (its allocator half made): neither is tried again here
    rejected = rejection(check_settings(torch, os.environ)) if result["cuda_build"] else None
    if rejected is not None:
        return refused(result, rejected)
    if config.get("cuda_start_error"):  # the framework probe started CUDA in this process, and failed
        return refused(result, f"CUDA failed to start in this process before: {config['cuda_start_error']}")
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    result["cuda_init_seconds"] = round(time.perf_counter() - started, 3)
    result["cuda_available"] = available
    result["device_count"] = count
    if not available:
        texts = [str(w.message).strip() for w in caught]
        said = "; ".join(text.splitlines()[0] for text in texts if text)
        if result["cuda_build"] is None:
            said = said or "this torch is a CPU-only build"
        result["error"] = "torch.cuda.is_available() is False" + (f": {said}" if said else "")
        result["error_step"] = "cuda init"
        return result
    try:
        torch.cuda.init()  # here, not at the first GPU's first step: a failure is said once, as itself
    except Exception as exc:
        return refused(result, error_text(exc))
    nvml = Nvml(config.get("ours") or ())
    size = int(config.get("size", 4096))
    for index in range(count):
        device = Gpu(torch, index, nvml, size).run()
        emit({"device": device})  # kept by the parent even if a later GPU hangs
        result["devices"].append(device)
    if nvml.error:  # NVML's own failure, else the last GPU it did not know
        result["nvml_error"] = nvml.error
    errors = [e for device in result["devices"] for e in device["errors"]]
    failed_checks = [
        f"GPU {d['index']}: {key} check failed"
        for d in result["devices"]
        for key in ("fp32_ok", "fp16_ok", "bf16_ok", "amp_step_ok", "conv_ok")
        if d.get(key) is False and not d["errors"]
    ]
    if errors:
        result["error"] = f"{errors[0]['step']}: {errors[0]['error']}"
        result["error_step"] = errors[0]["step"]
    elif failed_checks:
        result["error"] = "; ".join(failed_checks)
    else:
        result["status"] = "ok"
    return result


if __name__ == "__main__":
    script_main(run)
