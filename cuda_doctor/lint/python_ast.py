"""Python source checks: one scan of the tree (pyscan), then each rule's conclusion from it.

A rule that is about a script (no mixed precision, DataLoader settings, cudnn.benchmark) is
judged on the file alone, so that a file gets the same findings linted alone (as pre-commit does)
as with its whole repository; a version-dependent rule (deprecated APIs) reads the file's
project (project.py) for the release it runs on.
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

# Evidence, in the file's bytes, that precision is chosen on purpose or elsewhere (a wrapper
# whose launcher or config file sets it: accelerate, DeepSpeed, Lightning, a Trainer), or that the
# step runs on other processes (distributed autograd over RPC): CDL003 stays silent.  Plain
# substrings, shared with the byte pre-filter so that both judge a file alike.
AMP_EVIDENCE = (
    b"float16", b"autocast", b"GradScaler", b"mixed_precision", b"set_global_policy", b"bfloat16", b".half(",
    b"fp16", b"bf16", b"16-mixed", b"LossScale", b"use_amp", b"--amp", b"args.amp", b"apex", b"float64",
    b".double(", b"torch.double", b"LBFGS", b"precision=", b"Accelerator(", b"accelerate", b"deepspeed",
    b"lightning", b"Trainer(", b"dist_autograd",
)  # fmt: skip
# Evidence of loss scaling done somewhere (a scaler object, a wrapper that scales): CDL004 stays silent.
SCALER_EVIDENCE = (
    b"scaler", b"Scaler", b"SCALER", b"LossScale", b"loss_scale", b"Accelerator(", b"accelerate", b"deepspeed",
    b"DeepSpeed", b"lightning", b"Lightning", b"Trainer(",
)  # fmt: skip


def mentions(data: bytes, tokens: tuple[bytes, ...]) -> bool:
    return any(token in data for token in tokens)


DEEPSPEED = re.compile(rb"(?i)deepspeed")
TF_GPU = re.compile(rb"['\"]/?(gpu|GPU)(:\d+)?['\"]|MirroredStrategy")
TEST_PARTS = frozenset({"tests", "test", "testing", "test_utils", "unittests"})


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
    hits.extend(_amp_hits(scan, info))
    hits.extend(loader_hits(scan, b"from_pretrained" in info.data))
    hits.extend(_benchmark_hits(scan, info))
    return hits


# -- deprecated and removed APIs (CDL001, CDL002, CDL012) ----------------------------------


def _deprecated_api_hits(scan: Scan, context: ProjectContext) -> list[Hit]:
    hits: list[Hit] = []
    calls = scan.called
    for ref in scan.refs:
        if ref.gated:
            continue  # a fallback for an older release, or a branch for another version
        if ref.qual in apis.DEPRECATED_TORCH_AMP:
            hits.append(_torch_amp_hit(ref, context.torch))
        elif apis.TF_EXPERIMENTAL in ref.qual:
            hits.append(_tf_hit(ref, calls.get(id(ref.node)), context.tensorflow))
        elif ref.qual.startswith("jax."):
            api = apis.jax_lookup(ref.qual)
            if api is not None:
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
    what = "is deprecated from torch 2.4"
    detail = _older_detail(what, "torch", capped, image, "where it is still the API to use")
    if capped:
        fix = f"Upgrade torch (≥ 2.4), then use `{replacement}`; under the current pin keep `{ref.name}`."
    else:
        fix = (
            f'If that image\'s torch is 2.4 or newer (`python -c "import torch; print(torch.__version__)"` '
            f"in it), use `{replacement}`; on an older torch keep `{ref.name}`."
        )
    return _hit("CDL001", ref, detail, fix, Severity.INFO)


def _tf_hit(ref: Ref, call: ast.Call | None, tensorflow: FrameworkSource) -> Hit:
    """Removed in TensorFlow 2.9: an error unless the project runs an older TensorFlow (a pin
    below 2.9, or a base image whose TensorFlow is not known)."""
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
    below 1.10, a base image of unknown release); nothing under a torch below 1.9, where the
    launcher is not deprecated."""
    command = hit.capture_dict().get("command", "python -m torch.distributed.launch")
    if torch.capped_below(apis.TORCH_LAUNCH_DEPRECATED):
        return None
    where = torch.capped_below(apis.TORCHRUN) or (
        f"the base image `{torch.unknown_image()}`" if torch.unknown_image() else ""
    )
    if not where:
        return Hit.make(
            "CDL006", hit.line, hit.column, command=command, detail="is deprecated since torch 1.9", fix=LAUNCH_FIX
        )
    detail = f"is deprecated since torch 1.9; this project's torch comes from {where}"
    fix = (
        "On torch 1.10 or newer (where `torchrun` exists): " + LAUNCH_FIX[0].lower() + LAUNCH_FIX[1:] + " "
        "On an older torch keep the launcher."
    )
    return Hit.make("CDL006", hit.line, hit.column, severity=Severity.INFO, command=command, detail=detail, fix=fix)


LOCAL_RANK_READ = '`int(os.environ["LOCAL_RANK"])`'
TF_VERSION_COMMAND = 'python -c "import tensorflow as tf; print(tf.__version__)"'
LAUNCH_FIX = (
    "Use `torchrun` (e.g. `torchrun --nproc-per-node 4 train.py`) and read " + LOCAL_RANK_READ + " in the script."
)


# -- --local_rank (CDL007) -----------------------------------------------------------------


def _local_rank_hits(scan: Scan, info: FileInfo, deepspeed_project: bool) -> list[Hit]:
    """The deepspeed launcher passes --local_rank, so a DeepSpeed script (or any script of a
    project that requires deepspeed) must accept it; a script that also reads LOCAL_RANK from the
    environment keeps the argument for compatibility."""
    if not scan.local_ranks or deepspeed_project or "deepspeed" in scan.frameworks or DEEPSPEED.search(info.data):
        return []
    if b"LOCAL_RANK" in info.data or scan.distributed_helper:  # reads the environment too
        severity: Severity | None = Severity.INFO
        detail = (
            "kept next to a read of the LOCAL_RANK environment variable (or a distributed-setup helper "
            "that may read it): a compatibility shim for launchers that pass it"
        )
    else:
        severity, detail = None, "torchrun passes the local rank in the LOCAL_RANK environment variable"
    return [
        Hit.make("CDL007", *position(node), severity=severity, flag=flag, detail=detail)
        for node, flag in scan.local_ranks
    ]


# -- entry points: mixed precision (CDL003, CDL004, CDL005) and cudnn.benchmark (CDL010) --------


def is_entry_point(scan: Scan, info: FileInfo) -> bool:
    """A script that is run, not imported: a ``__main__`` block, a training step at module level,
    or a notebook."""
    return info.notebook or scan.main_guard or scan.module_loop


def trains(scan: Scan) -> bool:
    """A torch training loop: a backward() call and an optimizer step."""
    calls = {loop[2] for loop in scan.loops}
    return "backward()" in calls and len(calls) > 1


def _amp_hits(scan: Scan, info: FileInfo) -> list[Hit]:
    hits: list[Hit] = []
    entry = is_entry_point(scan, info)
    if (
        entry
        and scan.uses_gpu
        and trains(scan)
        and "torch" in scan.frameworks
        and not mentions(info.data, AMP_EVIDENCE)
    ):
        line, col, call, _ = min(scan.loops)
        hits.append(Hit.make("CDL003", line, col, framework="PyTorch", call=call, amp_fix=TORCH_AMP_FIX))
    elif (
        entry
        and "tensorflow" in scan.frameworks
        and scan.fit_calls
        and not mentions(info.data, AMP_EVIDENCE)
        and TF_GPU.search(info.data)
    ):
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


def _benchmark_hits(scan: Scan, info: FileInfo) -> list[Hit]:
    """In the script that trains a conv net on a GPU, and that sets no cuDNN option at all; a
    library module that defines the model must not set the process-wide flag."""
    convs = [c for c in scan.convs if not c[1].endswith("1d")]
    if not convs or not scan.uses_gpu or not is_entry_point(scan, info):
        return []  # 1-D convolutions run on sequences whose lengths vary: benchmark would re-tune
    if b"cudnn" in info.data:
        return []
    if not trains(scan):
        return []
    node, qual = min(convs, key=lambda c: (getattr(c[0], "lineno", 0), getattr(c[0], "col_offset", 0)))
    return [Hit.make("CDL010", *position(node), layer=qual.rsplit(".", 1)[-1])]
