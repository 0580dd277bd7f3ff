"""Python source checks: one scan of the tree (pyscan), then each rule's conclusion from it.

Rules about a script judge the file alone; version-dependent rules read the file's project for its release.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from cuda_doctor.core.results import Severity
from cuda_doctor.lint import apis
from cuda_doctor.lint.dataloaders import loader_hits
from cuda_doctor.lint.findings import Hit, position
from cuda_doctor.lint.project import FrameworkSource, ProjectContext
from cuda_doctor.lint.pyscan import Ref, Scan, keyword, scan_tree

TORCH_AMP_FIX = (
    'wrap the forward pass and the loss in `with torch.autocast("cuda", dtype=torch.bfloat16):` '
    '(Ampere or newer; with float16 also use `torch.amp.GradScaler("cuda")`)'
)
TF_AMP_FIX = (
    'call `tf.keras.mixed_precision.set_global_policy("mixed_float16")` (or '
    '"mixed_bfloat16" on Ampere or newer) before building the model'
)
DEEPSPEED = re.compile(rb"(?i)deepspeed")
# the parsed flag read (``args.local_rank``, ``getattr(args, "local_rank")``, ``vars(args)["local_rank"]``)
LOCAL_RANK_READ = re.compile(rb"\.local_rank\b|['\"]local_rank['\"]")
TF_GPU = re.compile(rb"['\"]/?(gpu|GPU)(:\d+)?['\"]|MirroredStrategy")
TEST_PARTS = frozenset({"tests", "test", "testing", "test_utils", "unittests"})
TF_VERSION_COMMAND = 'python -c "import tensorflow as tf; print(tf.__version__)"'
LAUNCH_FIX = (
    "Use `torchrun` (e.g. `torchrun --nproc-per-node 4 train.py`) and read "
    '`int(os.environ["LOCAL_RANK"])` in the script.'
)

# Evidence that precision is chosen on purpose or elsewhere (a wrapper or its config), or that the step
# runs on other processes: CDL003 stays silent.  Plain substrings, shared with the byte pre-filter.
AMP_EVIDENCE = (
    b"float16", b"autocast", b"GradScaler", b"mixed_precision", b"set_global_policy", b"bfloat16", b".half(",
    b"fp16", b"bf16", b"16-mixed", b"LossScale", b"use_amp", b"--amp", b"args.amp", b"apex", b"float64",
    b".double(", b"torch.double", b"LBFGS", b"precision=", b"Accelerator(", b"accelerate", b"deepspeed",
    b"lightning", b"Trainer(", b"dist_autograd", b"torch.half", b"colossalai",
)  # fmt: skip
# Evidence of loss scaling done somewhere (a scaler object, a wrapper that scales): CDL004 stays silent.
SCALER_EVIDENCE = (
    b"scaler", b"Scaler", b"SCALER", b"LossScale", b"loss_scale", b"Accelerator(", b"accelerate", b"deepspeed",
    b"DeepSpeed", b"lightning", b"Lightning", b"Trainer(",
)  # fmt: skip


def mentions(data: bytes, tokens: tuple[bytes, ...]) -> bool:
    return any(token in data for token in tokens)


@dataclass(frozen=True)
class FileInfo:
    """What the rules need to know about the file besides its tree."""

    path: str
    data: bytes
    notebook: bool = False

    @property
    def is_test(self) -> bool:
        parts = re.split(r"[\\/]", self.path)
        name = parts[-1]
        return (
            any(p in TEST_PARTS for p in parts[:-1])
            or name.startswith("test_")
            or name.endswith(("_test.py", "_tests.py"))
            or name == "conftest.py"
        )


def lint_source(text: str, path: str, context: ProjectContext, data: bytes | None = None) -> list[Hit]:
    """Parse and analyse; a SyntaxError propagates for the engine to report as CDL000."""
    tree = ast.parse(text, filename=path)
    info = FileInfo(path, data if data is not None else text.encode("utf-8", "surrogateescape"))
    return analyse(tree, context, info)


def analyse(tree: ast.Module, context: ProjectContext, info: FileInfo) -> list[Hit]:
    scan = scan_tree(tree)
    hits = list(scan.hits)
    hits.extend(_deprecated_api_hits(scan, context))
    hits.extend(_local_rank_hits(scan, info, bool(context.deepspeed.requirements)))
    if info.is_test:
        return hits
    hits.extend(_compile_hits(scan, context))
    hits.extend(_amp_hits(scan, info))
    hits.extend(loader_hits(scan, b"from_pretrained" in info.data, is_entry_point(scan, info)))
    hits.extend(_benchmark_hits(scan, info))
    return hits


def _deprecated_api_hits(scan: Scan, context: ProjectContext) -> list[Hit]:
    hits: list[Hit] = []
    for ref in scan.refs:
        if ref.gated:
            continue  # a fallback for an older release, or a branch for another version
        if ref.qual in apis.DEPRECATED_TORCH_AMP:
            hits.append(_torch_amp_hit(ref, context.torch))
        elif apis.TF_EXPERIMENTAL in ref.qual:
            hits.append(_tf_hit(ref, scan.called.get(id(ref.node)), context.tensorflow))
        elif ref.qual.startswith("jax.") and (api := apis.jax_lookup(ref.qual)) is not None:
            hits.append(_jax_hit(ref, api, context.jax))
    return hits


def _hit(rule_id: str, ref: Ref, detail: str, fix: str, severity: Severity | None = None) -> Hit:
    return Hit.make(rule_id, *position(ref.node), severity=severity, name=ref.name, detail=detail, fix=fix)


def _older_detail(what: str, framework: str, capped: str | None, image: str, pinned: str, whose: bool = True) -> str:
    """Why an older release may be the one the project runs: its pin, else its base image."""
    if capped:
        return f"{what}; the project pins `{capped}`, {pinned}"
    unknown = f", whose {framework} release cuda-doctor does not know" if whose else ""
    return f"{what}; this project's {framework} comes from its base image `{image}`{unknown}"


def _torch_amp_hit(ref: Ref, torch: FrameworkSource) -> Hit:
    """Under a torch below 2.4 the old API is the right one: torch.amp.GradScaler("cuda") exists
    only from 2.3 and torch.amp.custom_fwd from 2.4, so the fix is to upgrade first."""
    replacement = apis.DEPRECATED_TORCH_AMP[ref.qual]
    capped, image = torch.capped_below(apis.TORCH_AMP_API), torch.unknown_image()
    if not (capped or image):
        return _hit("CDL001", ref, "is deprecated (FutureWarning since torch 2.4)", f"Use `{replacement}`.")
    detail = _older_detail("is deprecated from torch 2.4", "torch", capped, image, "where it is still the API to use")
    if capped:
        fix = f"Upgrade torch (≥ 2.4), then use `{replacement}`; under the current pin keep `{ref.name}`."
    else:
        fix = (
            f'If that image\'s torch is 2.4 or newer (`python -c "import torch; print(torch.__version__)"` '
            f"in it), use `{replacement}`; on an older torch keep `{ref.name}`."
        )
    return _hit("CDL001", ref, detail, fix, Severity.INFO)


def _tf_hit(ref: Ref, call: ast.Call | None, tensorflow: FrameworkSource) -> Hit:
    """Removed in TensorFlow 2.9: an error unless the project may run an older TensorFlow."""
    leaf = ref.qual.split(apis.TF_EXPERIMENTAL + ".", 1)[-1].split(".")[0] if "experimental." in ref.qual else ""
    fix = apis.tf_fix(leaf, call)
    capped, image = tensorflow.capped_below(apis.TF_REMOVED), tensorflow.unknown_image()
    if not (capped or image):
        return _hit("CDL002", ref, "was removed in TensorFlow 2.9", fix)
    detail = _older_detail("was removed in TensorFlow 2.9", "TensorFlow", capped, image, "where it still exists")
    if image and not capped:
        fix = f"Check the image's TensorFlow (`{TF_VERSION_COMMAND}`); on 2.4 or newer: {fix[0].lower()}{fix[1:]}"
    elif tensorflow.capped_below(apis.TF_STABLE):
        fix = f"Upgrade TensorFlow (≥ 2.4) first: the stable API does not exist under this pin. Then: {fix}"
    return _hit("CDL002", ref, detail, fix, Severity.WARNING)


def _jax_hit(ref: Ref, api: apis.RemovedApi, jax: FrameworkSource) -> Hit:
    capped, image = jax.capped_below(api.removed), jax.unknown_image()
    if not (capped or image):
        return _hit("CDL012", ref, f"was removed in JAX {api.removed}", f"Use {api.fix}.")
    detail = _older_detail(f"was removed in JAX {api.removed}", "JAX", capped, image, "where it still exists", False)
    if capped:
        return _hit("CDL012", ref, detail, f"Before upgrading JAX, use {api.fix}.", Severity.INFO)
    return _hit("CDL012", ref, detail, f"Use {api.fix}.", Severity.WARNING)


def launch_for_project(hit: Hit, torch: FrameworkSource) -> Hit | None:
    """CDL006 where torchrun exists; an info note where the project's torch may predate it (a pin
    below 1.10, a base image of unknown release); nothing below torch 1.9, where it is not deprecated."""
    command = hit.capture_dict().get("command", "python -m torch.distributed.launch")
    if torch.capped_below(apis.TORCH_LAUNCH_DEPRECATED):
        return None
    image = torch.unknown_image()
    where = torch.capped_below(apis.TORCHRUN) or (f"the base image `{image}`" if image else "")
    detail, fix = "is deprecated since torch 1.9", LAUNCH_FIX
    severity: Severity | None = None
    if where:
        detail += f"; this project's torch comes from {where}"
        fix = f"On torch 1.10 or newer (where `torchrun` exists): {fix[0].lower()}{fix[1:]} "
        fix += "On an older torch keep the launcher."
        severity = Severity.INFO
    return Hit.make("CDL006", hit.line, hit.column, severity=severity, command=command, detail=detail, fix=fix)


def _local_rank_hits(scan: Scan, info: FileInfo, deepspeed_project: bool) -> list[Hit]:
    """The one case that breaks under torchrun: the script takes its local rank from the flag (reads
    ``args.local_rank``) and never from LOCAL_RANK. A flag nobody reads is only there so that a launcher
    that passes it does not fail argparse; a script that reads LOCAL_RANK too (or hands its arguments to a
    distributed-setup helper) gets the right rank; the deepspeed launcher passes --local_rank, so a
    DeepSpeed script (or project) must accept it."""
    if not scan.local_ranks or deepspeed_project or "deepspeed" in scan.frameworks or DEEPSPEED.search(info.data):
        return []
    if b"LOCAL_RANK" in info.data or scan.distributed_helper or not LOCAL_RANK_READ.search(info.data):
        return []
    return [Hit.make("CDL007", *position(node), flag=flag) for node, flag in scan.local_ranks]


def is_entry_point(scan: Scan, info: FileInfo) -> bool:
    """A script that is run, not imported: a ``__main__`` block, a module-level training step, or a notebook."""
    return info.notebook or scan.main_guard or scan.module_loop


def trains(scan: Scan) -> bool:
    """A torch training loop: a backward() call and an optimizer step."""
    calls = {loop[2] for loop in scan.loops}
    return "backward()" in calls and len(calls) > 1


def _amp_hits(scan: Scan, info: FileInfo) -> list[Hit]:
    hits: list[Hit] = []
    no_amp = is_entry_point(scan, info) and not mentions(info.data, AMP_EVIDENCE)
    if no_amp and scan.uses_gpu and trains(scan) and "torch" in scan.frameworks:
        line, col, call, _ = min(scan.loops)
        hits.append(Hit.make("CDL003", line, col, framework="PyTorch", call=call, amp_fix=TORCH_AMP_FIX))
    elif no_amp and "tensorflow" in scan.frameworks and scan.fit_calls and TF_GPU.search(info.data):
        fit = min(scan.fit_calls, key=position)
        hits.append(Hit.make("CDL003", *position(fit), framework="TensorFlow", call="model.fit()", amp_fix=TF_AMP_FIX))
    backward_functions = {loop[3] for loop in scan.loops if loop[2] == "backward()"}
    if backward_functions and not scan.grad_scalers and not mentions(info.data, SCALER_EVIDENCE):
        for node, dtype, function in scan.autocasts:
            if dtype == "float16" and function in backward_functions:
                hits.append(Hit.make("CDL004", *position(node)))
    dtypes = [dtype for _, dtype, _ in scan.autocasts]
    if scan.grad_scalers and dtypes and all(d == "bfloat16" for d in dtypes):
        hits += [Hit.make("CDL005", *position(s)) for s in scan.grad_scalers if keyword(s, "enabled") is None]
    return hits


def _compile_hits(scan: Scan, context: ProjectContext) -> list[Hit]:
    """The first torch.compile of a file whose project's image has no C compiler: one finding per file,
    as the image is the one cause (and the one fix) of every call's failure."""
    image = context.compilerless
    if image is None or not scan.compiles:
        return []
    node, call = min(scan.compiles, key=lambda found: position(found[0]))
    return [
        Hit.make(
            "CDL106",
            *position(node),
            call=call,
            dockerfile=image.dockerfile,
            from_line=image.line,
            image=image.image,
            flavour=image.flavour,
            fix=image.fix,
        )
    ]


def _benchmark_hits(scan: Scan, info: FileInfo) -> list[Hit]:
    """In the script that trains a conv net on a GPU and sets no cuDNN option (not in a library module)."""
    # 1-D convolutions run on sequences whose lengths vary: benchmark would re-tune
    convs = [c for c in scan.convs if not c[1].endswith("1d")]
    if not convs or not scan.uses_gpu or not is_entry_point(scan, info) or b"cudnn" in info.data or not trains(scan):
        return []
    node, qual = min(convs, key=lambda c: position(c[0]))
    return [Hit.make("CDL010", *position(node), layer=qual.rsplit(".", 1)[-1])]
