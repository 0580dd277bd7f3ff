"""One pass over a Python module's tree: everything the rules need, with the context they need it in.

Statements are visited in order with their context (inside a version-gated branch or an import
fallback, inside an annotation, which function, whether CUDA has surely been initialised by then);
expressions below a statement are walked with an explicit stack.  Each node is visited once.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from cuda_doctor.lint.apis import jax_lookup
from cuda_doctor.lint.findings import Hit, position

LAUNCH_MODULE = "torch.distributed.launch"
LAUNCH_RE = re.compile(r"-m\s+torch\.distributed\.launch\b")
LOCAL_RANK_FLAGS = ("--local_rank", "--local-rank")
VISIBLE_DEVICE_VARIABLES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
# Module names used as they are written even when no import of the file binds them (a star
# import, a notebook's earlier cell): ``torch.cuda.amp.autocast`` means what it says.
IMPLICIT_HEADS = frozenset({"torch", "tf", "tensorflow", "keras", "jax", "os"})
AUTOCASTS = ("torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast")
DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
CONV = re.compile(r"(Lazy)?Conv(Transpose)?[123]d$")
GPU_STRINGS = frozenset({"cuda", "CUDA", "gpu", "GPU", "nccl", "NCCL"})
GPU_PREFIXES = ("cuda:", "gpu:", "/gpu:", "GPU:", "/GPU:")

# Names in an ``if`` test that make its branches a version or feature gate.
GATE_WORD = re.compile(r"(?i)version|greater|_ge_|_lt_|^_?torch_\d|^_?(has|is)_(torch|native|amp|apex|tf|jax)")
FRAMEWORK_MODULES = ("torch", "tensorflow", "keras", "jax", "tf_keras")
VERSION_TEXT = re.compile(r"^\d+\.\d+")
FALLBACK_ERRORS = frozenset({"AttributeError", "ImportError", "ModuleNotFoundError", "TypeError", "NameError"})
BROAD_ERRORS = frozenset({"Exception", "BaseException"})

# torch.cuda calls that initialise CUDA in this process (torch/cuda/__init__.py: they call
# _lazy_init(), or, for is_available(), cudaGetDeviceCount, which runs cuInit); device_count()
# counts through NVML without initialising CUDA, and manual_seed*/empty_cache are lazy.
CUDA_INIT_CALLS = frozenset({
    "torch.cuda.init", "torch.cuda.is_available", "torch.cuda.set_device", "torch.cuda.current_device",
    "torch.cuda.synchronize", "torch.cuda.get_device_name", "torch.cuda.get_device_properties",
    "torch.cuda.get_device_capability", "torch.cuda.mem_get_info", "torch.cuda.memory_allocated",
    "torch.cuda.memory_reserved", "torch.cuda.max_memory_allocated", "torch.cuda.current_stream", "torch.cuda.Stream",
    "torch.cuda.Event", "torch.cuda.is_bf16_supported", "torch.cuda.FloatTensor", "torch.cuda.HalfTensor",
    "torch.cuda.LongTensor", "torch.cuda.IntTensor",
})  # fmt: skip


def dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is ast.Name:
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def const_str(node: ast.AST | None) -> str | None:
    if type(node) is ast.Constant and isinstance(node.value, str):
        return node.value
    return None


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for item in call.keywords:
        if item.arg == name:
            return item
    return None


@dataclass
class Ref:
    """A dotted name used in the code, resolved through the imports."""

    node: ast.AST
    name: str  # as written
    qual: str  # resolved
    gated: bool  # in a version/feature-gated branch, an import fallback, or of a gated import


@dataclass
class LoaderSite:
    """A ``DataLoader(...)`` call and what is around it."""

    call: ast.Call
    target: str  # the name it is assigned to, or ""
    function: int  # id of the enclosing function (0: module level)


@dataclass
class CudaState:
    """Whether CUDA has surely been initialised at this point of a block."""

    initialised: bool = False


Gates = tuple["ast.expr | bool", ...]  # if-tests to judge when needed; True: an import fallback


@dataclass
class Ctx:
    gated: Gates = ()
    annotation: bool = False
    function: int = 0
    cuda: CudaState = field(default_factory=CudaState)


@dataclass
class Scan:
    aliases: dict[str, str] = field(default_factory=dict)
    gated_aliases: set[str] = field(default_factory=set)
    reported_aliases: set[str] = field(default_factory=set)  # bound by an import already reported
    frameworks: set[str] = field(default_factory=set)
    hits: list[Hit] = field(default_factory=list)  # reported as they are seen
    refs: list[Ref] = field(default_factory=list)  # torch.cuda.amp / tf experimental / jax candidates
    uses_gpu: bool = False
    loops: list[tuple[int, int, str, int]] = field(default_factory=list)  # torch's: line, col, call, function
    fit_calls: list[ast.Call] = field(default_factory=list)
    autocasts: list[tuple[ast.AST, str | None, int]] = field(default_factory=list)  # node, dtype, function
    grad_scalers: list[ast.Call] = field(default_factory=list)
    loaders: list[LoaderSite] = field(default_factory=list)
    convs: list[tuple[ast.AST, str]] = field(default_factory=list)
    local_ranks: list[tuple[ast.AST, str]] = field(default_factory=list)
    vision_model: bool = False  # an image model: 2-D/3-D convolutions, torchvision/timm models
    distributed_helper: bool = False  # args handed to init_distributed_mode(args) and the like
    main_guard: bool = False
    module_loop: bool = False  # a backward() at module level (a script or notebook run top to bottom)
    assigned: dict[tuple[int, str], list[ast.expr]] = field(default_factory=dict)  # (function, name) → values
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: dict[str, ast.AST] = field(default_factory=dict)
    function_calls: dict[int, set[str]] = field(default_factory=dict)  # function id → names it calls
    called: dict[int, ast.Call] = field(default_factory=dict)  # func node id → its call (TF fixes)

    def resolve(self, name: str) -> str:
        head, _, rest = name.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return name
        return f"{base}.{rest}" if rest else base


# -- gates ---------------------------------------------------------------------------------


def is_gate_test(test: ast.expr, resolve: Callable[[str], str] = str) -> bool:
    """A version or feature check: ``torch.__version__ >= …``, ``is_torch_version(...)``,
    ``hasattr(torch, "amp")``, ``_TORCH_GREATER_EQUAL_2_4``, ``find_spec("apex")``."""
    for node in ast.walk(test):
        kind = type(node)
        if kind is ast.Name:
            if GATE_WORD.search(node.id):  # type: ignore[attr-defined]
                return True
        elif kind is ast.Attribute:
            if GATE_WORD.search(node.attr):  # type: ignore[attr-defined]
                return True
        elif kind is ast.Call:
            name = (dotted(node.func) or "").rsplit(".", 1)[-1]  # type: ignore[attr-defined]
            if name == "find_spec":
                return True
            if name in ("hasattr", "getattr") and node.args:  # type: ignore[attr-defined]
                owner = resolve(dotted(node.args[0]) or "")  # type: ignore[attr-defined]
                if owner.split(".")[0] in FRAMEWORK_MODULES:
                    return True
        elif kind is ast.Constant and isinstance(node.value, str) and VERSION_TEXT.match(node.value):  # type: ignore[attr-defined]
            return True
    return False


def is_main_test(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if type(test) is not ast.Compare or len(test.comparators) != 1 or type(test.ops[0]) is not ast.Eq:
        return False
    sides = [test.left, test.comparators[0]]
    return any(type(s) is ast.Name and s.id == "__name__" for s in sides) and any(
        const_str(s) == "__main__" for s in sides
    )


def _handler_names(handler: ast.ExceptHandler) -> set[str] | None:
    """The exception names a handler catches; None for a bare ``except:``."""
    if handler.type is None:
        return None
    nodes = handler.type.elts if type(handler.type) is ast.Tuple else [handler.type]
    return {(dotted(n) or "").rsplit(".", 1)[-1] for n in nodes}


def is_fallback_handler(handler: ast.ExceptHandler, body_imports: bool) -> bool:
    """``except (AttributeError, ImportError, TypeError)``: the code path for an older library;
    a bare or broad ``except`` only when the ``try`` imports something."""
    names = _handler_names(handler)
    if names is None:
        return body_imports
    return bool(names & FALLBACK_ERRORS) or (body_imports and bool(names & BROAD_ERRORS))


# -- the walk ------------------------------------------------------------------------------

_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _children(node: ast.AST) -> tuple[str, ...]:
    kind = type(node)
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = _CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f not in ("ctx", "type_comment"))
    return fields


class Scanner:
    def __init__(self, scan: Scan) -> None:
        self.scan = scan
        self.docstrings: set[int] = set()
        self._gate_cache: dict[int, bool] = {}

    def is_gated(self, gates: Gates) -> bool:
        """Judged only when a deprecated name or an import needs it: most tests never are."""
        for gate in gates:
            if gate is True:
                return True
            if gate is not False:
                key = id(gate)
                found = self._gate_cache.get(key)
                if found is None:
                    found = self._gate_cache[key] = is_gate_test(gate, self.scan.resolve)
                if found:
                    return True
        return False

    # statements ---------------------------------------------------------------------------

    def module(self, tree: ast.Module) -> None:
        self._prescan_imports(tree.body, False)
        self.block(tree.body, Ctx())

    def _prescan_imports(self, body: list[ast.stmt], gated: bool) -> None:
        """Module-level imports first (also those in if/try blocks), so that a function defined
        above an import still resolves its names."""
        for node in body:
            kind = type(node)
            if kind is ast.Import or kind is ast.ImportFrom:
                self._bind_imports(node, gated, report=False)  # type: ignore[arg-type]
            elif kind is ast.If:
                gate = gated or is_gate_test(node.test, self.scan.resolve)  # type: ignore[attr-defined]
                self._prescan_imports(node.body, gate)  # type: ignore[attr-defined]
                self._prescan_imports(node.orelse, gate)  # type: ignore[attr-defined]
            elif kind is ast.Try or kind.__name__ == "TryStar":
                imports = any(type(s) in (ast.Import, ast.ImportFrom) for s in node.body)  # type: ignore[attr-defined]
                guarded = any(is_fallback_handler(h, imports) for h in node.handlers)  # type: ignore[attr-defined]
                self._prescan_imports(node.body, gated or guarded)  # type: ignore[attr-defined]
                for handler in node.handlers:  # type: ignore[attr-defined]
                    self._prescan_imports(handler.body, gated or is_fallback_handler(handler, imports))
                self._prescan_imports(node.orelse, gated)  # type: ignore[attr-defined]
                self._prescan_imports(node.finalbody, gated)  # type: ignore[attr-defined]

    def block(self, body: list[ast.stmt], ctx: Ctx) -> None:
        if body and type(body[0]) is ast.Expr and const_str(body[0].value) is not None:
            self.docstrings.add(id(body[0].value))
        for node in body:
            self.statement(node, ctx)

    def statement(self, node: ast.stmt, ctx: Ctx) -> None:
        handler = _STATEMENTS.get(type(node).__name__)
        if handler is not None:
            handler(self, node, ctx)
            return
        for child in ast.iter_child_nodes(node):  # Return, Delete, Raise, Assert, Global, Pass …
            self.expr(child, ctx)  # type: ignore[arg-type]

    def _expr_statement(self, node: ast.Expr, ctx: Ctx) -> None:
        if const_str(node.value) is None:  # a bare string is a comment
            self.expr(node.value, ctx)

    def _assign(self, node: ast.Assign, ctx: Ctx) -> None:
        self.expr(node.value, ctx)
        for target in node.targets:
            self._assigned(target, node.value, ctx)
            self.expr(target, ctx)

    def _aug_assign(self, node: ast.AugAssign | ast.AnnAssign, ctx: Ctx) -> None:
        if type(node) is ast.AnnAssign:
            self.expr(node.annotation, replace(ctx, annotation=True))
        if node.value is not None:
            self.expr(node.value, ctx)
            self._assigned(node.target, node.value, ctx)
        self.expr(node.target, ctx)

    def _import(self, node: ast.Import | ast.ImportFrom, ctx: Ctx) -> None:
        self._bind_imports(node, self.is_gated(ctx.gated), report=True)

    def _class(self, node: ast.ClassDef, ctx: Ctx) -> None:
        self.scan.classes[node.name] = node
        for expr in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self.expr(expr, ctx)
        self.block(node.body, replace(ctx, cuda=CudaState()))

    def _with(self, node: ast.With | ast.AsyncWith, ctx: Ctx) -> None:
        for item in node.items:
            self.expr(item.context_expr, ctx)
            if item.optional_vars is not None:
                self.expr(item.optional_vars, ctx)
        self.block(node.body, ctx)

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While, ctx: Ctx) -> None:
        if type(node) is ast.While:
            self.expr(node.test, ctx)
        else:
            self.expr(node.iter, ctx)  # type: ignore[union-attr]
            self.expr(node.target, ctx)  # type: ignore[union-attr]
        inner = replace(ctx, cuda=CudaState(ctx.cuda.initialised))  # the body may not run
        self.block(node.body, inner)
        self.block(node.orelse, inner)

    def _match(self, node: ast.AST, ctx: Ctx) -> None:
        self.expr(node.subject, ctx)  # type: ignore[attr-defined]
        for case in node.cases:  # type: ignore[attr-defined]
            inner = replace(ctx, cuda=CudaState(ctx.cuda.initialised))
            if case.guard is not None:
                self.expr(case.guard, inner)
            self.block(case.body, inner)

    def _if(self, node: ast.If, ctx: Ctx) -> None:
        self.expr(node.test, ctx)
        if is_main_test(node.test) and ctx.function == 0:
            self.scan.main_guard = True
            self.block(node.body, ctx)  # a script runs it: CUDA state goes on
            self.block(node.orelse, replace(ctx, cuda=CudaState(ctx.cuda.initialised)))
            return
        gated = (*ctx.gated, node.test)
        self.block(node.body, replace(ctx, gated=gated, cuda=CudaState(ctx.cuda.initialised)))
        self.block(node.orelse, replace(ctx, gated=gated, cuda=CudaState(ctx.cuda.initialised)))

    def _try(self, node: ast.AST, ctx: Ctx) -> None:
        body: list[ast.stmt] = node.body  # type: ignore[attr-defined]
        imports = any(type(s) in (ast.Import, ast.ImportFrom) for s in body)
        # a try whose except handles the API's absence is a gate for its body too
        guarded = any(is_fallback_handler(h, imports) for h in node.handlers)  # type: ignore[attr-defined]
        self.block(body, replace(ctx, gated=(*ctx.gated, True)) if guarded else ctx)
        for handler in node.handlers:  # type: ignore[attr-defined]
            if handler.type is not None:
                self.expr(handler.type, ctx)
            gated = (*ctx.gated, True) if is_fallback_handler(handler, imports) else ctx.gated
            self.block(handler.body, replace(ctx, gated=gated, cuda=CudaState(ctx.cuda.initialised)))
        self.block(node.orelse, replace(ctx, cuda=CudaState(ctx.cuda.initialised)))  # type: ignore[attr-defined]
        self.block(node.finalbody, ctx)  # type: ignore[attr-defined]

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Ctx) -> None:
        self.scan.functions[node.name] = node
        for decorator in node.decorator_list:
            self.expr(decorator, ctx)
        args = node.args
        annotation = replace(ctx, annotation=True)
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None and arg.annotation is not None:
                self.expr(arg.annotation, annotation)
        for default in (*args.defaults, *(d for d in args.kw_defaults if d is not None)):
            self.expr(default, ctx)
        if node.returns is not None:
            self.expr(node.returns, annotation)
        self.block(node.body, Ctx(gated=ctx.gated, function=id(node)))

    def _assigned(self, target: ast.expr, value: ast.expr, ctx: Ctx) -> None:
        kind = type(target)
        if kind is ast.Name:
            self.scan.assigned.setdefault((ctx.function, target.id), []).append(value)  # type: ignore[attr-defined]
        elif kind is ast.Tuple or kind is ast.List:
            for element in target.elts:  # type: ignore[attr-defined]
                if type(element) is ast.Name:  # ``train, val = split(ds)``: each comes from the call
                    self.scan.assigned.setdefault((ctx.function, element.id), []).append(value)
        elif kind is ast.Subscript:
            self._environ_assignment(target, ctx)  # type: ignore[arg-type]
        if type(value) is ast.Call and kind in (ast.Name, ast.Attribute):
            self._named_loader(target.id if kind is ast.Name else target.attr, value)  # type: ignore[attr-defined]

    def _environ_assignment(self, target: ast.Subscript, ctx: Ctx) -> None:
        owner = dotted(target.value)
        key = const_str(target.slice)
        if owner and key in VISIBLE_DEVICE_VARIABLES and self.scan.resolve(owner) == "os.environ":
            self._visible_devices(target, key, ctx)

    def _visible_devices(self, node: ast.AST, variable: str, ctx: Ctx) -> None:
        if ctx.cuda.initialised:
            example = "CUDA_VISIBLE_DEVICES=0" if variable == "CUDA_VISIBLE_DEVICES" else f"{variable}=PCI_BUS_ID"
            self.scan.hits.append(Hit.make("CDL011", *position(node), variable=variable, example=example))

    def _named_loader(self, name: str, call: ast.Call) -> None:
        for site in reversed(self.scan.loaders):
            if site.call is call:
                site.target = name
                return

    # imports ------------------------------------------------------------------------------

    def _bind_imports(self, node: ast.Import | ast.ImportFrom, gated: bool, report: bool) -> None:
        scan = self.scan
        if type(node) is ast.Import:
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                target = alias.name if alias.asname else name
                self._bind(name, target, gated)
                _note_framework(alias.name, scan)
                if report and alias.name == LAUNCH_MODULE:
                    scan.hits.append(_launch_hit(node, f"import {LAUNCH_MODULE}"))
                if report and alias.name.startswith("jax."):
                    self._imported_api(node, alias.name, alias.asname or alias.name, gated, name)
            return
        module = node.module  # type: ignore[union-attr]
        if not module or node.level:  # type: ignore[union-attr]
            return
        _note_framework(module, scan)
        for alias in node.names:
            if alias.name == "*":
                continue
            full = f"{module}.{alias.name}"
            self._bind(alias.asname or alias.name, full, gated)
            if report and module.startswith("jax"):
                self._imported_api(node, full, f"{module}.{alias.name}", gated, alias.asname or alias.name)
            if report and (full == LAUNCH_MODULE or module == LAUNCH_MODULE):
                scan.hits.append(_launch_hit(node, f"from {module} import {alias.name}"))

    def _imported_api(self, node: ast.AST, qual: str, written: str, gated: bool, bound: str) -> None:
        """An import of a removed JAX API fails at the import: reported there, not at each use."""
        if jax_lookup(qual) is not None:
            self.scan.refs.append(Ref(node, written, qual, gated))
            self.scan.reported_aliases.add(bound)

    def _bind(self, name: str, target: str, gated: bool) -> None:
        scan = self.scan
        previous = scan.aliases.get(name)
        if gated or (previous is not None and previous != target and name not in ("torch", "tf", "jax")):
            scan.gated_aliases.add(name)
        scan.aliases[name] = target

    # expressions --------------------------------------------------------------------------

    def _chain(self, node: ast.AST, gates: Gates, ctx: Ctx) -> ast.AST | None:
        """A dotted name is a reference when an import binds its head (a name no import binds
        cannot be a framework API); a chain on a call or subscript: that base, to walk."""
        base = node
        while type(base) is ast.Attribute:
            base = base.value
        if type(base) is not ast.Name:
            return base
        if base.id in self.scan.aliases or base.id in IMPLICIT_HEADS:
            self._reference(node, dotted(node) or "", gates, ctx)
        return None

    def expr(self, root: ast.expr, ctx: Ctx) -> None:
        stack: list[tuple[ast.AST, Gates]] = [(root, ctx.gated)]
        while stack:
            node, gated = stack.pop()
            kind = type(node)
            if kind is ast.Attribute or kind is ast.Name:
                base = self._chain(node, gated, ctx)
                if base is not None:
                    stack.append((base, gated))  # a call or subscript at the base of the chain
                continue
            if kind is ast.Constant:
                value = node.value  # type: ignore[attr-defined]
                if type(value) is str and id(node) not in self.docstrings:
                    self._string(node, value)
                continue
            if kind is ast.Call:
                self._call(node, ctx)  # type: ignore[arg-type]
            elif kind is ast.IfExp:
                inner = (*gated, node.test)  # type: ignore[attr-defined]
                stack.append((node.test, gated))  # type: ignore[attr-defined]
                stack.append((node.body, inner))  # type: ignore[attr-defined]
                stack.append((node.orelse, inner))  # type: ignore[attr-defined]
                continue
            elif kind is ast.Lambda:
                stack.append((node.body, gated))  # type: ignore[attr-defined]
                continue
            for name in _children(node):
                value = getattr(node, name)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, ast.AST):
                            stack.append((item, gated))
                elif isinstance(value, ast.AST):
                    stack.append((value, gated))

    def _reference(self, node: ast.AST, name: str, gates: Gates, ctx: Ctx) -> None:
        scan = self.scan
        head = name.partition(".")[0]
        qual = scan.resolve(name)
        if qual.startswith("torch."):
            if qual.startswith(("torch.cuda", "torch.accelerator", "torch.backends.cudnn")):
                scan.uses_gpu = True
            if ".amp." in qual and not ctx.annotation:
                scan.refs.append(Ref(node, name, qual, head in scan.gated_aliases or self.is_gated(gates)))
        elif (not ctx.annotation and "mixed_precision.experimental" in qual) or (
            not ctx.annotation and qual.startswith("jax.") and head not in scan.reported_aliases
        ):
            scan.refs.append(Ref(node, name, qual, head in scan.gated_aliases or self.is_gated(gates)))
        elif qual.startswith(("accelerate.Accelerator", "deepspeed.initialize")):
            scan.uses_gpu = True

    def _string(self, node: ast.AST, text: str) -> None:
        scan = self.scan
        if text == LAUNCH_MODULE or (len(text) > 20 and LAUNCH_RE.search(text)):
            scan.hits.append(_launch_hit(node, f"python -m {LAUNCH_MODULE}"))
        elif len(text) < 12 and (text in GPU_STRINGS or text.startswith(GPU_PREFIXES)):
            scan.uses_gpu = True

    def _call(self, node: ast.Call, ctx: Ctx) -> None:
        scan = self.scan
        func = node.func
        leaf = func.attr if type(func) is ast.Attribute else getattr(func, "id", "")
        if ctx.function:
            scan.function_calls.setdefault(ctx.function, set()).add(leaf)
        if "istributed" in leaf:
            lower = leaf.lower()
            scan.distributed_helper |= "init" in lower or "setup" in lower
        if node.keywords and any(
            k.arg == "device" and type(k.value) is ast.Constant and str(k.value.value).startswith("cuda")
            for k in node.keywords
        ):
            ctx.cuda.initialised = True  # a tensor made on the GPU
        if type(func) is ast.Attribute:
            self._method_call(node, func, ctx)
        base = func
        while type(base) is ast.Attribute:
            base = base.value
        if type(base) is ast.Name and (base.id in scan.aliases or base.id in IMPLICIT_HEADS):
            self._named_call(node, scan.resolve(dotted(func) or ""), ctx)  # reached through an import

    def _method_call(self, node: ast.Call, func: ast.Attribute, ctx: Ctx) -> None:
        """What ``loss.backward()``, ``optimizer.step()``, ``model.fit()``, ``.cuda()`` … say."""
        scan = self.scan
        attr = func.attr
        if attr in ("Policy", "LossScaleOptimizer"):
            scan.called[id(func)] = node
        elif attr == "backward":
            scan.loops.append((node.lineno, node.col_offset + 1, "backward()", ctx.function))
            scan.module_loop |= ctx.function == 0
        elif attr == "step":
            owner = (dotted(func.value) or "").split(".")[-1].lower()
            if "optim" in owner or owner == "opt":
                scan.loops.append((node.lineno, node.col_offset + 1, f"{owner}.step()", ctx.function))
        elif attr in ("fit", "fit_generator"):
            scan.fit_calls.append(node)
        elif attr == "cuda":
            scan.uses_gpu = True
            ctx.cuda.initialised = True
        elif attr == "to" and node.args and (const_str(node.args[0]) or "").startswith("cuda"):
            ctx.cuda.initialised = True
        elif attr == "add_argument":
            flag = next((f for f in (const_str(a) for a in node.args) if f in LOCAL_RANK_FLAGS), None)
            if flag is not None:  # one finding per add_argument call, whatever its spellings
                arg = next(a for a in node.args if const_str(a) == flag)
                scan.local_ranks.append((arg, flag))
        elif attr in ("setdefault", "update", "putenv"):
            self._environ_call(node, attr, ctx)

    def _named_call(self, node: ast.Call, qual: str, ctx: Ctx) -> None:
        """A call by its resolved name: CUDA initialisers, autocast, GradScaler, DataLoader, models."""
        scan = self.scan
        if qual in CUDA_INIT_CALLS:
            ctx.cuda.initialised = True
        elif qual == "os.putenv":
            self._environ_call(node, "putenv", ctx)
        if qual.startswith(AUTOCASTS):
            scan.autocasts.append((node, _autocast_dtype(node, qual, scan), ctx.function))
        elif qual.endswith("GradScaler"):
            scan.grad_scalers.append(node)
        elif qual in DATALOADERS:
            scan.loaders.append(LoaderSite(node, "", ctx.function))
        elif qual.startswith("torch.nn.") and CONV.match(qual[9:]):
            scan.convs.append((node, qual))
            scan.vision_model = scan.vision_model or not qual.endswith("1d")
        elif qual.startswith("torchvision.models."):
            scan.convs.append((node, qual))
            scan.vision_model = True
        elif qual.startswith(("timm.create_model", "timm.models.", "torchvision.datasets.")):
            scan.vision_model = True

    def _environ_call(self, node: ast.Call, attr: str, ctx: Ctx) -> None:
        scan = self.scan
        owner = dotted(node.func.value) if type(node.func) is ast.Attribute else None
        if attr == "putenv" or (owner and scan.resolve(owner) == "os.environ"):
            keys: list[str] = []
            if attr == "update" and node.args and type(node.args[0]) is ast.Dict:
                keys = [k for k in (const_str(k) for k in node.args[0].keys) if k]
                keys += [k.arg for k in node.keywords if k.arg]
            elif node.args:
                key = const_str(node.args[0])
                keys = [key] if key else []
            for key in keys:
                if key in VISIBLE_DEVICE_VARIABLES:
                    self._visible_devices(node, key, ctx)


_STATEMENTS: dict[str, Callable[..., None]] = {
    "Expr": Scanner._expr_statement,
    "Assign": Scanner._assign,
    "AugAssign": Scanner._aug_assign,
    "AnnAssign": Scanner._aug_assign,
    "Import": Scanner._import,
    "ImportFrom": Scanner._import,
    "If": Scanner._if,
    "FunctionDef": Scanner._function,
    "AsyncFunctionDef": Scanner._function,
    "ClassDef": Scanner._class,
    "Try": Scanner._try,
    "TryStar": Scanner._try,
    "With": Scanner._with,
    "AsyncWith": Scanner._with,
    "For": Scanner._loop,
    "AsyncFor": Scanner._loop,
    "While": Scanner._loop,
    "Match": Scanner._match,
}


def _note_framework(module: str, scan: Scan) -> None:
    top = module.split(".")[0]
    if top in ("torch", "lightning", "pytorch_lightning", "accelerate"):
        scan.frameworks.add("torch")
    elif top in ("tensorflow", "keras", "tf_keras"):
        scan.frameworks.add("tensorflow")
    elif top in ("jax", "flax", "optax"):
        scan.frameworks.add("jax")
    if top in ("deepspeed", "accelerate", "lightning", "pytorch_lightning"):
        scan.frameworks.add(top)


def _launch_hit(node: ast.AST, command: str) -> Hit:
    return Hit.make("CDL006", *position(node), command=command)


LOW_PRECISION = {"torch.float16": "float16", "torch.half": "float16", "torch.bfloat16": "bfloat16"}


def _autocast_dtype(node: ast.Call, qual: str, scan: Scan) -> str | None:
    """float16 / bfloat16 / None (unknown, or autocast disabled)."""
    enabled = keyword(node, "enabled")
    if enabled is not None and not (type(enabled.value) is ast.Constant and enabled.value.value is True):
        return None  # disabled, or enabled at run time: cannot tell
    dtype_kw = keyword(node, "dtype")
    dtype_node = dtype_kw.value if dtype_kw else None
    device: str | None
    if qual.startswith("torch.cuda.amp"):
        device = "cuda"
    elif qual.startswith("torch.cpu.amp"):
        device = "cpu"
    else:
        first = node.args[0] if node.args else getattr(keyword(node, "device_type"), "value", None)
        device = const_str(first)
        if dtype_node is None and len(node.args) > 1:
            dtype_node = node.args[1]
    if dtype_node is not None:
        name = dotted(dtype_node)
        return LOW_PRECISION.get(scan.resolve(name)) if name else None
    if device == "cuda":
        return "float16"  # autocast's default on CUDA
    if device == "cpu":
        return "bfloat16"
    return None


def scan_tree(tree: ast.Module) -> Scan:
    scan = Scan()
    Scanner(scan).module(tree)
    return scan
