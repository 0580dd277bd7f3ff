"""One pass over a Python module's tree: everything the rules need, with the context they need it in
(a version-gated branch or import fallback, an annotation, which function, whether CUDA is initialised).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

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
# Calls and keywords whose strings are words for a person (a message, a help text), not a command to run:
# a launcher named there is a mention, not a use.
MENTION_CALLS = frozenset({
    "print", "pprint", "echo", "write", "info", "warning", "warn", "debug", "error", "critical", "exception",
    "log", "fatal", "secho", "rank_zero_info", "rank_zero_warn", "print_rank_0", "print_rank0", "exit",
})  # fmt: skip
MENTION_KEYWORDS = frozenset({"help", "description", "epilog", "usage", "msg", "message"})

# torch.cuda calls that initialise CUDA (device_count() goes through NVML; manual_seed*/empty_cache are lazy).
CUDA_INIT_CALLS = frozenset({
    "torch.cuda.init", "torch.cuda.is_available", "torch.cuda.set_device", "torch.cuda.current_device",
    "torch.cuda.synchronize", "torch.cuda.get_device_name", "torch.cuda.get_device_properties",
    "torch.cuda.get_device_capability", "torch.cuda.mem_get_info", "torch.cuda.memory_allocated",
    "torch.cuda.memory_reserved", "torch.cuda.max_memory_allocated", "torch.cuda.current_stream", "torch.cuda.Stream",
    "torch.cuda.Event", "torch.cuda.is_bf16_supported", "torch.cuda.FloatTensor", "torch.cuda.HalfTensor",
    "torch.cuda.LongTensor", "torch.cuda.IntTensor",
})  # fmt: skip
TORCH_COMPILE = "torch.compile"
LOW_PRECISION = {"torch.float16": "float16", "torch.half": "float16", "torch.bfloat16": "bfloat16"}
FRAMEWORK_OF = {
    **dict.fromkeys(("torch", "lightning", "pytorch_lightning", "accelerate"), "torch"),
    **dict.fromkeys(("tensorflow", "keras", "tf_keras"), "tensorflow"),
    **dict.fromkeys(("jax", "flax", "optax"), "jax"),
}


def dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if type(node) is ast.Name else None


def const_str(node: ast.AST | None) -> str | None:
    return node.value if type(node) is ast.Constant and isinstance(node.value, str) else None


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((item for item in call.keywords if item.arg == name), None)


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


# If-tests to judge when needed; True: an except branch that handles an API's absence (a fallback);
# WHILE_PRESENT: code that runs wherever the API it tries or probes exists (the body of such a ``try``, of
# ``if hasattr(torch.cuda.amp, "autocast")``): a gate for a removed API, the live branch for a deprecated one.
Present = Literal["present"]
WHILE_PRESENT: Present = "present"
Gates = tuple[ast.expr | Literal[True] | Present, ...]
Gating = bool | Present  # of an import: gated, not, or bound only where the API exists
DEPRECATED_AMP_MODULES = ("torch.cuda.amp", "torch.cpu.amp")


@dataclass
class Ctx:
    gated: Gates = ()
    annotation: bool = False
    function: int = 0
    cuda: CudaState = field(default_factory=CudaState)

    def branch(self, gated: Gates | None = None) -> Ctx:
        """The context of code that may not run: it starts with this CUDA state, without changing it."""
        return replace(self, gated=self.gated if gated is None else gated, cuda=CudaState(self.cuda.initialised))


@dataclass
class Scan:
    aliases: dict[str, str] = field(default_factory=dict)
    gated_aliases: set[str] = field(default_factory=set)
    present_aliases: set[str] = field(default_factory=set)  # bound where the API exists (WHILE_PRESENT)
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
    compiles: list[tuple[ast.AST, str]] = field(default_factory=list)  # torch.compile with inductor: node, as written

    def resolve(self, name: str) -> str:
        head, _, rest = name.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return name
        return f"{base}.{rest}" if rest else base


def is_gate_test(test: ast.expr, resolve: Callable[[str], str] = str) -> bool:
    """A version or feature check: ``torch.__version__ >= …``, ``is_torch_version(...)``,
    ``hasattr(torch, "amp")``, ``_TORCH_GREATER_EQUAL_2_4``, ``find_spec("apex")``."""
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and GATE_WORD.search(node.id):
            return True
        if isinstance(node, ast.Attribute) and GATE_WORD.search(node.attr):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and VERSION_TEXT.match(node.value):
            return True
        if isinstance(node, ast.Call):
            name = (dotted(node.func) or "").rsplit(".", 1)[-1]
            if name == "find_spec":
                return True
            owner = resolve(dotted(node.args[0]) or "") if name in ("hasattr", "getattr") and node.args else ""
            if owner.split(".")[0] in FRAMEWORK_MODULES:
                return True
    return False


def _probes_deprecated_amp(test: ast.expr, resolve: Callable[[str], str]) -> bool:
    """``hasattr(torch.cuda.amp, "autocast")``, ``hasattr(torch.cuda, "amp")``: true wherever the API exists."""
    if type(test) is not ast.Call or (dotted(test.func) or "") not in ("hasattr", "getattr") or not test.args:
        return False
    owner = resolve(dotted(test.args[0]) or "")
    attribute = const_str(test.args[1]) if len(test.args) > 1 else None
    probed = f"{owner}.{attribute}" if attribute else owner
    return probed.startswith(DEPRECATED_AMP_MODULES)


def deprecated_amp_branch(test: ast.expr, resolve: Callable[[str], str] = str) -> bool | None:
    """Which branch of an ``if`` runs wherever the deprecated torch.cuda.amp API exists: True (the body:
    ``hasattr(torch.cuda.amp, "autocast") and torch.cuda.is_available()``), False (the ``else``:
    ``not hasattr(torch.cuda, "amp") or not hasattr(torch.cuda.amp, "autocast")``), None (not such a
    probe, or one mixed with another version or feature check, which decides as a gate)."""
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        inner = deprecated_amp_branch(test.operand, resolve)
        return None if inner is None else not inner
    if type(test) is ast.BoolOp:
        # `and`: true only where every probe holds; `or`: false only where every negated probe fails
        wanted = type(test.op) is ast.And
        sides = [deprecated_amp_branch(value, resolve) for value in test.values]
        if wanted in sides and all(
            side == wanted or (side is None and not is_gate_test(value, resolve))
            for side, value in zip(sides, test.values, strict=True)
        ):
            return wanted
        return None
    return True if _probes_deprecated_amp(test, resolve) else None


def _within(outer: Gating, inner: Gating) -> Gating:
    """The gating of code inside both: a gate wins over code that runs where the API exists."""
    if outer is True or inner is True:
        return True
    return WHILE_PRESENT if outer or inner else False


def _terminal(body: list[ast.stmt]) -> bool:
    """A block that leaves its function (or loop): what follows it runs only when its test was false."""
    return bool(body) and type(body[-1]) in (ast.Return, ast.Raise, ast.Continue, ast.Break)


def is_main_test(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if type(test) is not ast.Compare or len(test.comparators) != 1 or type(test.ops[0]) is not ast.Eq:
        return False
    sides = [test.left, test.comparators[0]]
    return any(type(s) is ast.Name and s.id == "__name__" for s in sides) and any(
        const_str(s) == "__main__" for s in sides
    )


def is_fallback_handler(handler: ast.ExceptHandler, body_imports: bool) -> bool:
    """``except (AttributeError, ImportError, TypeError)``: the code path for an older library;
    a bare or broad ``except`` only when the ``try`` imports something."""
    if handler.type is None:
        return body_imports
    nodes = handler.type.elts if type(handler.type) is ast.Tuple else [handler.type]
    names = {(dotted(n) or "").rsplit(".", 1)[-1] for n in nodes}
    return bool(names & FALLBACK_ERRORS) or (body_imports and bool(names & BROAD_ERRORS))


def _try_gates(node: ast.Try) -> tuple[bool, bool]:
    """(the try imports something or checks a version, an except of it handles an API's absence).
    A bare ``except`` after a version check is the fallback for a torch the check cannot read."""
    imports = any(
        type(s) in (ast.Import, ast.ImportFrom) or (type(s) is ast.If and is_gate_test(s.test)) for s in node.body
    )
    return imports, any(is_fallback_handler(h, imports) for h in node.handlers)


class Scanner:
    def __init__(self, scan: Scan) -> None:
        self.scan = scan
        self.docstrings: set[int] = set()
        self.mentions: set[int] = set()  # strings in a message or help text (ids of their Constant nodes)
        self._gate_cache: dict[int, bool] = {}

    def is_gated(self, gates: Gates, deprecated: bool = False) -> bool:
        """Judged only when a deprecated name or an import needs it: most tests never are.
        ``deprecated``: the API still exists, so code that runs where it exists is not gated."""
        for gate in gates:
            if gate is True:
                return True
            if isinstance(gate, str):  # WHILE_PRESENT
                if not deprecated:
                    return True
                continue
            if id(gate) not in self._gate_cache:
                self._gate_cache[id(gate)] = is_gate_test(gate, self.scan.resolve)
            if self._gate_cache[id(gate)]:
                return True
        return False

    def prescan_imports(self, body: list[ast.stmt], gated: Gating) -> None:
        """Module-level imports first, so that a function defined above an import still resolves its names."""
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                self._bind_imports(node, gated, report=False)
            elif isinstance(node, ast.If):
                gate = is_gate_test(node.test, self.scan.resolve)
                live = deprecated_amp_branch(node.test, self.scan.resolve)
                self.prescan_imports(node.body, _within(gated, WHILE_PRESENT if live is True else gate))
                self.prescan_imports(node.orelse, _within(gated, WHILE_PRESENT if live is False else gate))
            elif type(node).__name__ in ("Try", "TryStar"):
                block: ast.Try = node  # type: ignore[assignment]  # a TryStar has the same fields
                imports, guarded = _try_gates(block)
                self.prescan_imports(block.body, _within(gated, WHILE_PRESENT if guarded else False))
                for handler in block.handlers:
                    self.prescan_imports(handler.body, _within(gated, is_fallback_handler(handler, imports)))
                self.prescan_imports(block.orelse, gated)
                self.prescan_imports(block.finalbody, gated)

    def block(self, body: list[ast.stmt], ctx: Ctx) -> None:
        if body and type(body[0]) is ast.Expr and const_str(body[0].value) is not None:
            self.docstrings.add(id(body[0].value))
        for node in body:
            self.statement(node, ctx)
            if type(node) is ast.If and not node.orelse and _terminal(node.body) and ctx.function:
                # `if torch_version >= (2, 4): return new()` then `return old()`: the rest is its else branch
                # (the test is judged as a gate only when a deprecated name below needs it)
                ctx = replace(ctx, gated=(*ctx.gated, node.test))

    def statement(self, node: ast.stmt, ctx: Ctx) -> None:
        """Dispatched by node class, as ``ast.NodeVisitor`` does."""
        handler = getattr(self, f"visit_{type(node).__name__}", None)
        if handler is not None:
            handler(node, ctx)
            return
        for child in ast.iter_child_nodes(node):  # Return, Delete, Raise, Assert, Global, Pass …
            self.expr(child, ctx)  # type: ignore[arg-type]

    def visit_Raise(self, node: ast.Raise | ast.Assert, ctx: Ctx) -> None:
        message = node.exc if type(node) is ast.Raise else node.msg  # type: ignore[union-attr]
        if message is not None:
            self._mention(message)
        for child in ast.iter_child_nodes(node):
            self.expr(child, ctx)  # type: ignore[arg-type]

    visit_Assert = visit_Raise

    def _mention(self, node: ast.AST) -> None:
        self.mentions.update(id(n) for n in ast.walk(node) if type(n) is ast.Constant)

    def visit_Expr(self, node: ast.Expr, ctx: Ctx) -> None:
        if const_str(node.value) is None:  # a bare string is a comment
            self.expr(node.value, ctx)

    def visit_Assign(self, node: ast.Assign, ctx: Ctx) -> None:
        self.expr(node.value, ctx)
        for target in node.targets:
            self._assigned(target, node.value, ctx)
            self.expr(target, ctx)

    def visit_AugAssign(self, node: ast.AugAssign | ast.AnnAssign, ctx: Ctx) -> None:
        if type(node) is ast.AnnAssign:
            self.expr(node.annotation, replace(ctx, annotation=True))
        if node.value is not None:
            self.expr(node.value, ctx)
            self._assigned(node.target, node.value, ctx)
        self.expr(node.target, ctx)

    visit_AnnAssign = visit_AugAssign

    def visit_Import(self, node: ast.Import | ast.ImportFrom, ctx: Ctx) -> None:
        gated: Gating = self.is_gated(ctx.gated, deprecated=True)
        if not gated and self.is_gated(ctx.gated):
            gated = WHILE_PRESENT  # bound where the API exists: gated only for a removed API
        self._bind_imports(node, gated, report=True)

    visit_ImportFrom = visit_Import

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Ctx) -> None:
        self.scan.classes[node.name] = node
        for expr in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self.expr(expr, ctx)
        self.block(node.body, replace(ctx, cuda=CudaState()))

    def visit_With(self, node: ast.With | ast.AsyncWith, ctx: Ctx) -> None:
        for item in node.items:
            self.expr(item.context_expr, ctx)
            if item.optional_vars is not None:
                self.expr(item.optional_vars, ctx)
        self.block(node.body, ctx)

    visit_AsyncWith = visit_With

    def visit_For(self, node: ast.For | ast.AsyncFor | ast.While, ctx: Ctx) -> None:
        if type(node) is ast.While:
            self.expr(node.test, ctx)
        else:
            self.expr(node.iter, ctx)  # type: ignore[union-attr]
            self.expr(node.target, ctx)  # type: ignore[union-attr]
        inner = ctx.branch()
        self.block(node.body, inner)
        self.block(node.orelse, inner)

    visit_AsyncFor = visit_For
    visit_While = visit_For

    def visit_Match(self, node: ast.Match, ctx: Ctx) -> None:
        self.expr(node.subject, ctx)
        for case in node.cases:
            inner = ctx.branch()
            if case.guard is not None:
                self.expr(case.guard, inner)
            self.block(case.body, inner)

    def visit_If(self, node: ast.If, ctx: Ctx) -> None:
        self.expr(node.test, ctx)
        if is_main_test(node.test) and ctx.function == 0:
            self.scan.main_guard = True
            self.block(node.body, ctx)  # a script runs it: CUDA state goes on
            self.block(node.orelse, ctx.branch())
            return
        live = deprecated_amp_branch(node.test, self.scan.resolve)
        for body, branch in ((node.body, True), (node.orelse, False)):
            # the branch that runs wherever torch.cuda.amp exists is its live branch, not a fallback
            gate: ast.expr | Present = WHILE_PRESENT if live is branch else node.test
            self.block(body, ctx.branch(gated=(*ctx.gated, gate)))

    def visit_Try(self, node: ast.Try, ctx: Ctx) -> None:
        # a try whose except handles the API's absence is a gate for its body too
        imports, guarded = _try_gates(node)
        self.block(node.body, replace(ctx, gated=(*ctx.gated, WHILE_PRESENT)) if guarded else ctx)
        for handler in node.handlers:
            if handler.type is not None:
                self.expr(handler.type, ctx)
            gated = (*ctx.gated, True) if is_fallback_handler(handler, imports) else ctx.gated
            self.block(handler.body, ctx.branch(gated=gated))
        self.block(node.orelse, ctx.branch())
        self.block(node.finalbody, ctx)

    visit_TryStar = visit_Try

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Ctx) -> None:
        self.scan.functions[node.name] = node
        for decorator in node.decorator_list:
            self.expr(decorator, ctx)
            name = dotted(decorator)  # ``@torch.compile`` (a call, ``@torch.compile(...)``, is seen as one)
            if name and self._imported(name) and self.scan.resolve(name) == TORCH_COMPILE:
                self.scan.compiles.append((decorator, _written(f"@{name}", name)))
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

    visit_AsyncFunctionDef = visit_FunctionDef

    def _assigned(self, target: ast.expr, value: ast.expr, ctx: Ctx) -> None:
        # ``train, val = split(ds)``: each name comes from the call
        for name in target.elts if isinstance(target, ast.Tuple | ast.List) else [target]:
            if isinstance(name, ast.Name):
                self.scan.assigned.setdefault((ctx.function, name.id), []).append(value)
        if isinstance(target, ast.Subscript):
            owner, key = dotted(target.value), const_str(target.slice)
            if owner and key in VISIBLE_DEVICE_VARIABLES and self.scan.resolve(owner) == "os.environ":
                self._visible_devices(target, key, ctx)
        if isinstance(value, ast.Call) and isinstance(target, ast.Name | ast.Attribute):
            loader = next((site for site in reversed(self.scan.loaders) if site.call is value), None)
            if loader is not None:
                loader.target = target.id if isinstance(target, ast.Name) else target.attr

    def _visible_devices(self, node: ast.AST, variable: str, ctx: Ctx) -> None:
        if ctx.cuda.initialised:
            example = "CUDA_VISIBLE_DEVICES=0" if variable == "CUDA_VISIBLE_DEVICES" else f"{variable}=PCI_BUS_ID"
            self.scan.hits.append(Hit.make("CDL011", *position(node), variable=variable, example=example))

    def _bind_imports(self, node: ast.Import | ast.ImportFrom, gated: Gating, report: bool) -> None:
        scan = self.scan
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                self._bind(name, alias.name if alias.asname else name, gated)
                _note_framework(alias.name, scan)
                if report and alias.name == LAUNCH_MODULE and gated is not True:
                    scan.hits.append(_launch_hit(node, f"import {LAUNCH_MODULE}"))
                if report and alias.name.startswith("jax."):
                    self._imported_api(node, alias.name, alias.asname or alias.name, bool(gated), name)
            return
        module = node.module
        if not module or node.level:
            return
        _note_framework(module, scan)
        for alias in node.names:
            if alias.name == "*":
                continue
            full = f"{module}.{alias.name}"
            self._bind(alias.asname or alias.name, full, gated)
            if report and module.startswith("jax"):
                self._imported_api(node, full, full, bool(gated), alias.asname or alias.name)
            if report and (full == LAUNCH_MODULE or module == LAUNCH_MODULE) and gated is not True:
                scan.hits.append(_launch_hit(node, f"from {module} import {alias.name}"))

    def _imported_api(self, node: ast.AST, qual: str, written: str, gated: bool, bound: str) -> None:
        """An import of a removed JAX API fails at the import: reported there, not at each use."""
        if jax_lookup(qual) is not None:
            self.scan.refs.append(Ref(node, written, qual, gated))
            self.scan.reported_aliases.add(bound)

    def _bind(self, name: str, target: str, gated: Gating) -> None:
        scan = self.scan
        previous = scan.aliases.get(name)
        if gated is True or (previous is not None and previous != target and name not in ("torch", "tf", "jax")):
            scan.gated_aliases.add(name)
        elif gated:
            scan.present_aliases.add(name)
        scan.aliases[name] = target

    def _imported(self, name: str) -> bool:
        """Whether a dotted name's head is bound by an import (or is a module name used as written)."""
        head = name.partition(".")[0]
        return head in self.scan.aliases or head in IMPLICIT_HEADS

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
                    self._string(node, value, gated)
                continue
            if kind is ast.IfExp:
                inner = (*gated, node.test)  # type: ignore[attr-defined]
                stack += [(node.test, gated), (node.body, inner), (node.orelse, inner)]  # type: ignore[attr-defined]
                continue
            if kind is ast.Lambda:
                stack.append((node.body, gated))  # type: ignore[attr-defined]
                continue
            if kind is ast.Call:
                self._call(node, ctx)  # type: ignore[arg-type]
            stack.extend((child, gated) for child in ast.iter_child_nodes(node))

    def _reference(self, node: ast.AST, name: str, gates: Gates, ctx: Ctx) -> None:
        scan = self.scan
        head = name.partition(".")[0]
        qual = scan.resolve(name)
        if qual.startswith("torch."):
            if qual.startswith(("torch.cuda", "torch.accelerator", "torch.backends.cudnn")):
                scan.uses_gpu = True
            candidate = ".amp." in qual and not ctx.annotation
        else:
            jax = qual.startswith("jax.") and head not in scan.reported_aliases
            candidate = not ctx.annotation and ("mixed_precision.experimental" in qual or jax)
            if not candidate and qual.startswith(("accelerate.Accelerator", "deepspeed.initialize")):
                scan.uses_gpu = True
        if candidate:
            # torch.cuda.amp still exists: code that runs where it exists is its live branch
            deprecated = qual.startswith("torch.")
            gated = head in scan.gated_aliases or (head in scan.present_aliases and not deprecated)
            scan.refs.append(Ref(node, name, qual, gated or self.is_gated(gates, deprecated)))

    def _string(self, node: ast.AST, text: str, gates: Gates) -> None:
        scan = self.scan
        if text == LAUNCH_MODULE or (len(text) > 20 and LAUNCH_RE.search(text)):
            # a command that runs it, not a message naming it, nor a branch for a torch without torchrun
            if id(node) not in self.mentions and not self.is_gated(gates, deprecated=True):
                scan.hits.append(_launch_hit(node, f"python -m {LAUNCH_MODULE}"))
        elif len(text) < 12 and (text in GPU_STRINGS or text.startswith(GPU_PREFIXES)):
            scan.uses_gpu = True

    def _call(self, node: ast.Call, ctx: Ctx) -> None:
        scan = self.scan
        func = node.func
        leaf = func.attr if type(func) is ast.Attribute else getattr(func, "id", "")
        if ctx.function:
            scan.function_calls.setdefault(ctx.function, set()).add(leaf)
        if leaf in MENTION_CALLS:
            for argument in node.args:
                self._mention(argument)
        for item in node.keywords:
            if item.arg in MENTION_KEYWORDS or leaf in MENTION_CALLS:
                self._mention(item.value)
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
            flags = [(arg, const_str(arg) or "") for arg in node.args if const_str(arg) in LOCAL_RANK_FLAGS]
            scan.local_ranks += flags[:1]  # one finding per add_argument call, whatever its spellings
        elif attr in ("setdefault", "update", "putenv"):
            self._environ_call(node, attr, ctx)

    def _named_call(self, node: ast.Call, qual: str, ctx: Ctx) -> None:
        """A call by its resolved name: CUDA initialisers, autocast, GradScaler, DataLoader, models."""
        scan = self.scan
        if qual in CUDA_INIT_CALLS:
            ctx.cuda.initialised = True
        elif qual == TORCH_COMPILE and _inductor(node):
            name = dotted(node.func) or TORCH_COMPILE
            scan.compiles.append((node, _written(f"{name}(…)", name)))
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
        owner = dotted(node.func.value) if type(node.func) is ast.Attribute else None
        if attr != "putenv" and not (owner and self.scan.resolve(owner) == "os.environ"):
            return
        if attr == "update" and node.args and type(node.args[0]) is ast.Dict:
            keys = [const_str(k) for k in node.args[0].keys] + [k.arg for k in node.keywords]
        else:
            keys = [const_str(node.args[0])] if node.args else []
        for key in keys:
            if key in VISIBLE_DEVICE_VARIABLES:
                self._visible_devices(node, key, ctx)


def _note_framework(module: str, scan: Scan) -> None:
    top = module.split(".")[0]
    if top in FRAMEWORK_OF:
        scan.frameworks.add(FRAMEWORK_OF[top])
    if top in ("deepspeed", "accelerate", "lightning", "pytorch_lightning"):
        scan.frameworks.add(top)


def _written(text: str, name: str) -> str:
    """How a torch.compile use reads in a message: ``tc(…)`` (torch.compile) under another name."""
    return f"`{text}`" if name == TORCH_COMPILE else f"`{text}` (`{TORCH_COMPILE}`)"


def _inductor(call: ast.Call) -> bool:
    """torch.compile with its default backend, inductor (Triton kernels on a GPU, C++ on a CPU): another
    backend (``"eager"``, ``"cudagraphs"``, a function, one from ``**kwargs``) builds nothing with a C
    compiler, and ``disable=True`` compiles nothing."""
    for item in call.keywords:
        if item.arg is None or (item.arg == "backend" and const_str(item.value) != "inductor"):
            return False
        if item.arg == "disable" and type(item.value) is ast.Constant and item.value.value is True:
            return False
    return True


def _launch_hit(node: ast.AST, command: str) -> Hit:
    return Hit.make("CDL006", *position(node), command=command)


def _autocast_dtype(node: ast.Call, qual: str, scan: Scan) -> str | None:
    """float16 / bfloat16 / None (unknown, or autocast disabled)."""
    enabled = keyword(node, "enabled")
    if enabled is not None and not (type(enabled.value) is ast.Constant and enabled.value.value is True):
        return None  # disabled, or enabled at run time: cannot tell
    dtype_node = getattr(keyword(node, "dtype"), "value", None)
    if qual.startswith("torch.cuda.amp"):
        device: str | None = "cuda"
    elif qual.startswith("torch.cpu.amp"):
        device = "cpu"
    else:
        device = const_str(node.args[0] if node.args else getattr(keyword(node, "device_type"), "value", None))
        if dtype_node is None and len(node.args) > 1:
            dtype_node = node.args[1]
    if dtype_node is not None:
        name = dotted(dtype_node)
        return LOW_PRECISION.get(scan.resolve(name)) if name else None
    return {"cuda": "float16", "cpu": "bfloat16"}.get(device or "")  # autocast's default per device


def scan_tree(tree: ast.Module) -> Scan:
    scanner = Scanner(Scan())
    scanner.prescan_imports(tree.body, False)
    scanner.block(tree.body, Ctx())
    return scanner.scan
