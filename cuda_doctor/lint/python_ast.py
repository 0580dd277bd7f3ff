"""Python source checks, by AST (stdlib ``ast``): one walk collects everything a rule needs."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from cuda_doctor.lint.findings import Hit
from cuda_doctor.results import Severity

# torch.cuda.amp / torch.cpu.amp → torch.amp (FutureWarning since torch 2.4).
DEPRECATED_TORCH_AMP = {
    "torch.cuda.amp.autocast": 'torch.amp.autocast("cuda", ...)',
    "torch.cuda.amp.GradScaler": 'torch.amp.GradScaler("cuda", ...)',
    "torch.cuda.amp.custom_fwd": 'torch.amp.custom_fwd(device_type="cuda")',
    "torch.cuda.amp.custom_bwd": 'torch.amp.custom_bwd(device_type="cuda")',
    "torch.cpu.amp.autocast": 'torch.amp.autocast("cpu", ...)',
    "torch.cpu.amp.GradScaler": 'torch.amp.GradScaler("cpu", ...)',
}
TF_EXPERIMENTAL_PREFIXES = (
    "tensorflow.keras.mixed_precision.experimental",
    "tf.keras.mixed_precision.experimental",
    "keras.mixed_precision.experimental",
)
TF_REPLACEMENTS = {
    "set_policy": "tf.keras.mixed_precision.set_global_policy",
    "global_policy": "tf.keras.mixed_precision.global_policy",
    "Policy": "tf.keras.mixed_precision.Policy",
    "LossScaleOptimizer": "tf.keras.mixed_precision.LossScaleOptimizer",
}
AUTOCAST = {
    "torch.autocast": None,
    "torch.amp.autocast": None,
    "torch.amp.autocast_mode.autocast": None,
    "torch.cuda.amp.autocast": "cuda",
    "torch.cpu.amp.autocast": "cpu",
}
GRAD_SCALERS = (
    "torch.amp.GradScaler",
    "torch.cuda.amp.GradScaler",
    "torch.cpu.amp.GradScaler",
    "torch.amp.grad_scaler.GradScaler",
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
)
LOW_PRECISION = {
    "torch.float16": "float16",
    "torch.half": "float16",
    "torch.bfloat16": "bfloat16",
}
DATALOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
CONV_LAYERS = frozenset(
    f"torch.nn.{kind}{n}d" for kind in ("Conv", "ConvTranspose", "LazyConv") for n in (1, 2, 3)
)  # cuDNN picks an algorithm for each: what cudnn.benchmark speeds up
TF_AMP_NAMES = ("set_global_policy", "mixed_precision.Policy", "mixed_precision.set_policy")
LAUNCH_MODULE = "torch.distributed.launch"
LAUNCH_RE = re.compile(r"-m\s+torch\.distributed\.launch\b")
LOCAL_RANK_FLAGS = ("--local_rank", "--local-rank")

TORCH_AMP_FIX = (
    'wrap the forward pass and the loss in `with torch.autocast("cuda", dtype=torch.bfloat16):` '
    '(Ampere or newer; with float16 also use `torch.amp.GradScaler("cuda")`)'
)
TF_AMP_FIX = (
    'call `tf.keras.mixed_precision.set_global_policy("mixed_float16")` (or '
    '"mixed_bfloat16" on Ampere or newer) before building the model'
)


def dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


@dataclass
class _State:
    aliases: dict[str, str] = field(default_factory=dict)
    frameworks: set[str] = field(default_factory=set)
    hits: list[Hit] = field(default_factory=list)
    uses_cuda: bool = False
    uses_amp: bool = False
    grad_scalers: list[ast.Call] = field(default_factory=list)
    autocasts: list[tuple[ast.Call, str | None]] = field(default_factory=list)  # dtype or None=unknown
    loops: list[tuple[int, int, str, str]] = field(default_factory=list)  # line, col, framework, call
    fit_calls: list[ast.Call] = field(default_factory=list)
    dataloaders: list[ast.Call] = field(default_factory=list)
    convs: list[tuple[ast.AST, str]] = field(default_factory=list)
    sets_benchmark: bool = False
    project_pin: str = ""  # a torch requirement of the project that allows no torch >= 2.4

    def resolve(self, name: str) -> str:
        head, _, rest = name.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return name
        return f"{base}.{rest}" if rest else base


def _collect_imports(nodes: list[ast.stmt], state: _State) -> None:
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    state.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    state.aliases.setdefault(top, top)
                _note_framework(alias.name, state)
                if alias.name == LAUNCH_MODULE:
                    state.hits.append(_launch_hit(node, f"import {LAUNCH_MODULE}"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            _note_framework(node.module, state)
            for alias in node.names:
                if alias.name == "*":
                    continue
                state.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" == LAUNCH_MODULE or node.module == LAUNCH_MODULE:
                    state.hits.append(_launch_hit(node, f"from {node.module} import {alias.name}"))


def _note_framework(module: str, state: _State) -> None:
    top = module.split(".")[0]
    if top in ("torch", "lightning", "pytorch_lightning", "accelerate"):
        state.frameworks.add("torch")
    elif top in ("tensorflow", "keras", "tf_keras"):
        state.frameworks.add("tensorflow")


def _launch_hit(node: ast.AST, command: str) -> Hit:
    return Hit.make("CDL006", getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1, command=command)


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _kw(call: ast.Call, name: str) -> ast.keyword | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword
    return None


def _has_star_kwargs(call: ast.Call) -> bool:
    return any(k.arg is None for k in call.keywords)


def _precision_of(node: ast.AST, state: _State) -> str | None:
    name = dotted(node)
    return LOW_PRECISION.get(state.resolve(name)) if name else None


def _asks_low_precision(arg: str | None, value: ast.expr, state: _State) -> bool:
    """dtype=torch.bfloat16, fp16=True (HF), precision="16-mixed" (Lightning), mixed_precision="fp16"."""
    if arg in ("dtype", "torch_dtype"):
        return _precision_of(value, state) is not None
    if arg in ("fp16", "bf16"):
        return isinstance(value, ast.Constant) and value.value is True
    if arg == "precision":
        return "16" in str(getattr(value, "value", ""))
    if arg == "mixed_precision":
        return _const_str(value) not in (None, "no")
    return False


def _visit_call(node: ast.Call, state: _State) -> None:
    func = node.func
    if isinstance(func, ast.Attribute):
        _visit_method_call(node, func, state)
    for keyword in node.keywords:
        value = keyword.value
        if _asks_low_precision(keyword.arg, value, state):
            state.uses_amp = True
        elif keyword.arg == "device" and (_const_str(value) or "").startswith("cuda"):
            state.uses_cuda = True
    name = dotted(func)
    if name:
        _visit_named_call(node, state.resolve(name), state)


def _visit_method_call(node: ast.Call, func: ast.Attribute, state: _State) -> None:
    """What ``x.backward()``, ``optimizer.step()``, ``model.fit()``, ``.cuda()`` … say about the code."""
    attr = func.attr
    if attr == "backward":
        state.loops.append((node.lineno, node.col_offset + 1, "torch", "backward()"))
    elif attr == "step":
        owner = (dotted(func.value) or "").split(".")[-1].lower()
        if "optim" in owner or owner == "opt":
            state.loops.append((node.lineno, node.col_offset + 1, "torch", f"{owner}.step()"))
    elif attr in ("fit", "fit_generator"):
        state.fit_calls.append(node)
    elif attr in ("cuda",):
        state.uses_cuda = True
    elif attr in ("half", "bfloat16"):
        state.uses_amp = True
    elif attr == "add_argument":
        for arg in node.args:
            flag = _const_str(arg)
            if flag in LOCAL_RANK_FLAGS:
                state.hits.append(Hit.make("CDL007", arg.lineno, arg.col_offset + 1, flag=flag))


def _visit_named_call(node: ast.Call, qual: str, state: _State) -> None:
    """A call by its resolved name (``torch.autocast``, ``DataLoader``, ``nn.Conv2d`` …)."""
    if qual in AUTOCAST:
        state.uses_amp = True
        _note_autocast(node, qual, state)
    elif qual in GRAD_SCALERS or qual.endswith(".GradScaler"):
        state.uses_amp = True
        state.grad_scalers.append(node)
    elif qual.endswith(TF_AMP_NAMES):
        state.uses_amp = True
    elif qual in DATALOADERS:
        state.dataloaders.append(node)
    elif qual in CONV_LAYERS or qual.startswith("torchvision.models."):
        state.convs.append((node, qual))
    elif qual.startswith("torch.cuda."):
        state.uses_cuda = True
    elif qual in ("torch.set_default_dtype",) and node.args and _precision_of(node.args[0], state):
        state.uses_amp = True


def _note_autocast(node: ast.Call, qual: str, state: _State) -> None:
    enabled = _kw(node, "enabled")
    if enabled is not None and isinstance(enabled.value, ast.Constant) and enabled.value.value is False:
        return
    device = AUTOCAST[qual]
    if device is None:
        dev_node = node.args[0] if node.args else getattr(_kw(node, "device_type"), "value", None)
        device = _const_str(dev_node) if dev_node is not None else None
    dtype_kw = _kw(node, "dtype")
    dtype_node = dtype_kw.value if dtype_kw else (node.args[1] if len(node.args) > 1 else None)
    if dtype_node is not None:
        dtype = _precision_of(dtype_node, state)
    elif device == "cuda":
        dtype = "float16"  # autocast's default on CUDA
    elif device == "cpu":
        dtype = "bfloat16"
    else:
        dtype = None
    if device is not None and device.startswith("cuda"):
        state.uses_cuda = True
    state.autocasts.append((node, dtype))


def _visit_reference(node: ast.Attribute | ast.Name, state: _State, consumed: set[int]) -> None:
    if id(node) in consumed:
        return
    name = dotted(node)
    if name is None:
        return
    qual = state.resolve(name)
    if qual in DEPRECATED_TORCH_AMP:
        state.hits.append(_deprecated_amp_hit(node, name, DEPRECATED_TORCH_AMP[qual], state))
        _consume(node, consumed)
    elif qual.startswith(TF_EXPERIMENTAL_PREFIXES) or name.startswith(TF_EXPERIMENTAL_PREFIXES):
        leaf = qual.rsplit(".", 1)[-1]
        replacement = TF_REPLACEMENTS.get(leaf, "tf.keras.mixed_precision.set_global_policy")
        state.hits.append(Hit.make("CDL002", node.lineno, node.col_offset + 1, name=name, replacement=replacement))
        state.uses_amp = True
        _consume(node, consumed)
    elif qual in LOW_PRECISION:
        state.uses_amp = True
    elif qual.startswith("torch.cuda"):
        state.uses_cuda = True


def _deprecated_amp_hit(node: ast.AST, name: str, replacement: str, state: _State) -> Hit:
    """Under a pin below torch 2.4 the old API is the right one: torch.amp.GradScaler("cuda")
    exists only from 2.3 and torch.amp.custom_fwd from 2.4, so the fix is to upgrade first."""
    line, column = getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1
    pin = state.project_pin
    if not pin:
        detail = "is deprecated (FutureWarning since torch 2.4)"
        return Hit.make("CDL001", line, column, name=name, detail=detail, fix=f"Use `{replacement}`.")
    detail = f"is deprecated from torch 2.4; the project pins `{pin}`, where it is still the API to use"
    fix = f"Upgrade torch (≥ 2.4), then use `{replacement}`; under the current pin keep `{name}`."
    return Hit.make("CDL001", line, column, severity=Severity.INFO, name=name, detail=detail, fix=fix)


def _consume(node: ast.AST, consumed: set[int]) -> None:
    while isinstance(node, ast.Attribute):
        node = node.value
        consumed.add(id(node))


def _visit_assign_targets(targets: list[ast.expr], state: _State) -> None:
    for target in targets:
        name = dotted(target)
        if name and (state.resolve(name) == "torch.backends.cudnn.benchmark" or name.endswith("cudnn.benchmark")):
            state.sets_benchmark = True


def analyse(tree: ast.Module, project: ProjectFlags) -> list[Hit]:
    """One walk sorts the nodes by type; imports are applied first so that names resolve."""
    state = _State(project_pin=project.torch_below_2_4_from)
    imports: list[ast.stmt] = []
    calls: list[ast.Call] = []
    references: list[ast.Attribute | ast.Name] = []
    strings: list[ast.Constant] = []
    docstrings: set[int] = set()
    targets: list[ast.expr] = []
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Attribute or kind is ast.Name:
            references.append(node)  # type: ignore[arg-type]
        elif kind is ast.Call:
            calls.append(node)  # type: ignore[arg-type]
        elif kind is ast.Constant:
            strings.append(node)  # type: ignore[arg-type]
        elif kind is ast.Expr and type(node.value) is ast.Constant:  # type: ignore[attr-defined]
            docstrings.add(id(node.value))  # type: ignore[attr-defined]
        elif kind is ast.Import or kind is ast.ImportFrom:
            imports.append(node)  # type: ignore[arg-type]
        elif kind is ast.Assign:
            targets.extend(node.targets)  # type: ignore[attr-defined]
        elif kind is ast.AugAssign or kind is ast.AnnAssign:
            targets.append(node.target)  # type: ignore[attr-defined]
    _collect_imports(imports, state)
    _visit_assign_targets(targets, state)
    consumed: set[int] = set()
    for ref in references:
        _visit_reference(ref, state, consumed)
    for call in calls:
        _visit_call(call, state)
    for const in strings:
        _visit_string(const, state, docstrings)
    return _conclude(state, project)


def _visit_string(node: ast.Constant, state: _State, docstrings: set[int]) -> None:
    text = node.value
    if id(node) in docstrings or not isinstance(text, str):
        return
    if text == LAUNCH_MODULE or LAUNCH_RE.search(text):
        state.hits.append(_launch_hit(node, f"python -m {LAUNCH_MODULE}"))
    elif text == "cuda" or text.startswith("cuda:"):
        state.uses_cuda = True


def _conclude(state: _State, project: ProjectFlags) -> list[Hit]:
    hits = state.hits
    if "tensorflow" in state.frameworks:
        for call in state.fit_calls:
            state.loops.append((call.lineno, call.col_offset + 1, "tensorflow", "model.fit()"))
    state.loops.sort()

    if state.loops and not project.amp and not state.uses_amp:
        line, col, framework, loop_call = state.loops[0]
        hits.append(Hit.make("CDL003", line, col, framework=framework, call=loop_call, amp_fix=amp_fix(framework)))

    has_backward = any(f == "torch" for _, _, f, _ in state.loops)
    if has_backward and not state.grad_scalers and not project.grad_scaler:
        for call, dtype in state.autocasts:
            if dtype == "float16":
                hits.append(Hit.make("CDL004", call.lineno, call.col_offset + 1))
    dtypes = [dtype for _, dtype in state.autocasts]
    if state.grad_scalers and dtypes and all(d == "bfloat16" for d in dtypes):
        for call in state.grad_scalers:
            hits.append(Hit.make("CDL005", call.lineno, call.col_offset + 1))

    if state.uses_cuda:
        hits.extend(_dataloader_hits(state))
    if state.convs and not state.sets_benchmark and not project.cudnn_benchmark and (state.uses_cuda or state.loops):
        node, qual = min(state.convs, key=lambda c: (getattr(c[0], "lineno", 0), getattr(c[0], "col_offset", 0)))
        hits.append(
            Hit.make(
                "CDL010", getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1, layer=qual.rsplit(".", 1)[-1]
            )
        )
    return hits


def _dataloader_hits(state: _State) -> list[Hit]:
    hits: list[Hit] = []
    for call in state.dataloaders:
        if _has_star_kwargs(call):
            continue  # the settings come from elsewhere: cannot tell
        workers = _kw(call, "num_workers")
        if workers is None:
            hits.append(
                Hit.make("CDL008", call.lineno, call.col_offset + 1, detail="num_workers unset (defaults to 0)")
            )
        elif isinstance(workers.value, ast.Constant) and workers.value.value == 0:
            hits.append(Hit.make("CDL008", workers.value.lineno, workers.value.col_offset + 1, detail="num_workers=0"))
        pin = _kw(call, "pin_memory")
        if pin is None:
            hits.append(Hit.make("CDL009", call.lineno, call.col_offset + 1, detail="without pin_memory"))
        elif isinstance(pin.value, ast.Constant) and pin.value.value is False:
            hits.append(Hit.make("CDL009", pin.value.lineno, pin.value.col_offset + 1, detail="with pin_memory=False"))
    return hits


def amp_fix(framework: str) -> str:
    return TF_AMP_FIX if framework == "tensorflow" else TORCH_AMP_FIX


# -- cheap byte-level facts: project-wide mentions, and whether a file needs its AST at all --

AMP_TOKENS = (
    b"autocast",
    b"GradScaler",
    b"mixed_precision",
    b"set_global_policy",
    b"float16",
    b"bfloat16",
    b".half()",
    b"fp16",
    b"bf16",
    b"16-mixed",
    b"LossScale",
)
SCALER_TOKENS = (b"GradScaler", b"LossScale")
BENCHMARK_TOKENS = (b"cudnn.benchmark",)
LOOP_TOKENS = (b".backward(", b".step(", b".fit(", b".fit_generator(")


@dataclass(frozen=True)
class ProjectFlags:
    """What the whole project mentions anywhere (so a rule about 'no X anywhere' can hold)."""

    amp: bool = False
    grad_scaler: bool = False
    cudnn_benchmark: bool = False
    # From the project's requirements files / pyproject.toml (empty: no such pin).
    torch_release: str = ""  # an exact pin, "2.1.0"
    torch_release_from: str = ""  # "torch==2.1.0 (requirements.txt)"
    torch_below_2_4_from: str = ""  # a requirement that allows no torch >= 2.4, as written

    @classmethod
    def of(cls, data: bytes) -> ProjectFlags:
        return cls(
            amp=any(t in data for t in AMP_TOKENS),
            grad_scaler=any(t in data for t in SCALER_TOKENS),
            cudnn_benchmark=any(t in data for t in BENCHMARK_TOKENS),
        )

    def __or__(self, other: ProjectFlags) -> ProjectFlags:
        return ProjectFlags(
            self.amp or other.amp,
            self.grad_scaler or other.grad_scaler,
            self.cudnn_benchmark or other.cudnn_benchmark,
            self.torch_release or other.torch_release,
            self.torch_release_from or other.torch_release_from,
            self.torch_below_2_4_from or other.torch_below_2_4_from,
        )


def has_loop_tokens(data: bytes) -> bool:
    return any(t in data for t in LOOP_TOKENS)


def needs_ast(data: bytes, project: ProjectFlags) -> bool:
    """False only when no check could fire on this file: every check needs one of these words.

    Parsing is the cost of linting; most files of a large tree mention none of the APIs.
    """
    has = data.__contains__
    if has(b"cuda.amp") or has(b"cpu.amp") or has(b".amp.") or has(b"import amp"):
        return True
    if has(b"mixed_precision") and has(b"experimental"):
        return True
    if has(b"distributed.launch") or has(b"import launch"):
        return True
    if (has(b"local_rank") or has(b"local-rank")) and has(b"add_argument"):
        return True
    if has(b"GradScaler") and has(b"bfloat16"):
        return True
    loops = has_loop_tokens(data)
    if loops and (not project.amp or (has(b"autocast") and not project.grad_scaler)):
        return True
    cuda = has(b"cuda")
    if cuda and has(b"DataLoader"):
        return True
    conv = has(b"Conv") or has(b"torchvision")
    return conv and (cuda or loops) and not project.cudnn_benchmark


def lint_source(text: str, path: str, project: ProjectFlags) -> list[Hit]:
    """Parse and analyse; a SyntaxError propagates for the engine to report as CDL000."""
    tree = ast.parse(text, filename=path)
    return analyse(tree, project)
