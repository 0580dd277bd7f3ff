"""Deprecated and removed framework APIs: what replaces each, and from which release."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from cuda_doctor.tables import load_table

# torch.cuda.amp / torch.cpu.amp → torch.amp (FutureWarning since torch 2.4).
DEPRECATED_TORCH_AMP = {
    "torch.cuda.amp.autocast": 'torch.amp.autocast("cuda", ...)',
    "torch.cuda.amp.GradScaler": 'torch.amp.GradScaler("cuda", ...)',
    "torch.cuda.amp.custom_fwd": 'torch.amp.custom_fwd(device_type="cuda")',
    "torch.cuda.amp.custom_bwd": 'torch.amp.custom_bwd(device_type="cuda")',
    "torch.cpu.amp.autocast": 'torch.amp.autocast("cpu", ...)',
    "torch.cpu.amp.GradScaler": 'torch.amp.GradScaler("cpu", ...)',
}
# The same names from the modules that define them (``from torch.cuda.amp.autocast_mode import autocast``).
DEPRECATED_TORCH_AMP.update(
    {
        f"{package}.{module}.{name}": DEPRECATED_TORCH_AMP[f"{package}.{name}"]
        for package, module, names in (
            ("torch.cuda.amp", "autocast_mode", ("autocast", "custom_fwd", "custom_bwd")),
            ("torch.cuda.amp", "grad_scaler", ("GradScaler",)),
            ("torch.cpu.amp", "autocast_mode", ("autocast",)),
            ("torch.cpu.amp", "grad_scaler", ("GradScaler",)),
        )
        for name in names
    }
)
TORCH_AMP_API = "2.4"  # torch.amp.custom_fwd exists from 2.4, torch.amp.GradScaler("cuda") from 2.3
TORCH_LAUNCH_DEPRECATED = "1.9"
TORCHRUN = "1.10"  # the torchrun console script

TF_EXPERIMENTAL = "mixed_precision.experimental"
TF_REMOVED = "2.9"
TF_STABLE = "2.4"
TF_REPLACEMENTS = {
    "set_policy": "tf.keras.mixed_precision.set_global_policy",
    "global_policy": "tf.keras.mixed_precision.global_policy",
    "Policy": "tf.keras.mixed_precision.Policy",
    "LossScaleOptimizer": "tf.keras.mixed_precision.LossScaleOptimizer",
}


def tf_fix(leaf: str, call: ast.Call | None) -> str:
    """A runnable replacement for one experimental name; the stable ``Policy`` has no
    ``loss_scale`` and the stable ``LossScaleOptimizer`` takes ``dynamic``/``initial_scale``."""
    stable = TF_REPLACEMENTS.get(leaf)
    if stable is None:
        return (
            "Use the stable `tf.keras.mixed_precision` API (available since TensorFlow 2.4), e.g. "
            '`tf.keras.mixed_precision.set_global_policy("mixed_float16")`.'
        )
    if call is None:
        return f"Use `{stable}` (available since TensorFlow 2.4)."
    scale = next((item.value for item in call.keywords if item.arg == "loss_scale"), None)
    if scale is None and len(call.args) >= 2:
        scale = call.args[1]
    if scale is None or leaf not in ("Policy", "LossScaleOptimizer"):
        return f"Use `{stable}` with the same arguments (available since TensorFlow 2.4)."
    first = ast.unparse(call.args[0]) if call.args else ('"mixed_float16"' if leaf == "Policy" else "optimizer")
    if leaf == "Policy" and type(scale) is ast.Constant and scale.value is None:
        return f"Use `{stable}({first})`: drop `loss_scale=None` (available since TensorFlow 2.4)."
    if leaf == "Policy":
        return (
            f"Use `{stable}({first})`; the stable Policy takes no `loss_scale`: wrap the optimizer in "
            "`tf.keras.mixed_precision.LossScaleOptimizer(optimizer)` instead, which scales the loss "
            "dynamically (available since TensorFlow 2.4)."
        )
    if type(scale) is ast.Constant and scale.value == "dynamic":
        return f"Use `{stable}({first})`: dynamic loss scaling is its default (available since TensorFlow 2.4)."
    return (
        f"Use `{stable}({first}, dynamic=False, initial_scale={ast.unparse(scale)})` for a fixed "
        "loss scale (available since TensorFlow 2.4)."
    )


@dataclass(frozen=True)
class RemovedApi:
    old: str
    removed: str
    fix: str


@functools.lru_cache(maxsize=1)
def jax_removed() -> tuple[dict[str, RemovedApi], tuple[RemovedApi, ...]]:
    """(exact name → row, module rows whose every name is gone) from rules/data/jax_apis.toml."""
    exact: dict[str, RemovedApi] = {}
    modules: list[RemovedApi] = []
    for row in load_table("jax_apis").get("api", []):
        api = RemovedApi(str(row["old"]), str(row["removed"]), str(row["fix"]))
        if api.old.endswith(".*"):
            modules.append(api)
        else:
            exact[api.old] = api
    return exact, tuple(modules)


def jax_lookup(qual: str) -> RemovedApi | None:
    exact, modules = jax_removed()  # a module row's ``old`` ends in ".*"
    return exact.get(qual) or next((m for m in modules if qual == m.old[:-2] or qual.startswith(m.old[:-1])), None)


@functools.lru_cache(maxsize=1)
def jax_tokens() -> tuple[bytes, ...]:
    """Every removed name's last part (a module: its name), for the byte pre-filter; a name under
    a removed module is found by the module's."""
    exact, modules = jax_removed()
    prefixes = tuple(api.old[:-1] for api in modules)
    names = [api.old for api in exact.values() if not api.old.startswith(prefixes)]
    names += [api.old[:-2] for api in modules]
    return tuple(dict.fromkeys(name.rsplit(".", 1)[-1].encode() for name in names))
