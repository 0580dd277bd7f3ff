"""Whether a Python file needs its tree at all: a necessary condition for every check, on bytes.

Each clause is what one check cannot do without, so a file for which this says False cannot have a finding.
"""

from __future__ import annotations

import functools
import re

from cuda_doctor.lint.apis import jax_tokens
from cuda_doctor.lint.python_ast import AMP_EVIDENCE, SCALER_EVIDENCE, FileInfo, mentions

# Everything the scanner takes for GPU use, the most frequent first (the test stops at the first found).
GPU_TOKENS = (
    b"cuda", b"gpu", b"GPU", b"CUDA", b"cudnn", b"accelerator", b"Accelerator", b"nccl", b"NCCL", b"deepspeed",
    b"MirroredStrategy",
)  # fmt: skip
AUTOCAST_CALL = re.compile(rb"autocast\s*\(")
DEF_LINE = re.compile(rb"^[ \t]*(async[ \t]+def|def)\b")
MAIN_GUARD = re.compile(rb"__name__\s*==\s*['\"]__main__['\"]|['\"]__main__['\"]\s*==\s*__name__")
# what CDL010 needs: a 2-D/3-D convolution layer or a torchvision model
VISION_CONV = (b"Conv2d", b"Conv3d", b"Transpose2d", b"Transpose3d", b"torchvision")
TRAINING = re.compile(rb"(?i)train|shuffle|sampler")


@functools.lru_cache(maxsize=1)
def jax_name() -> re.Pattern[bytes]:
    """A removed JAX name used or imported: after a dot, a space, a comma or a parenthesis."""
    return re.compile(rb"[.\s,(](" + b"|".join(map(re.escape, jax_tokens())) + rb")\b")


def needs_ast(data: bytes, path: str = "", compilerless: bool = False) -> bool:
    """``compilerless``: the file's project builds an image with no C compiler (CDL106)."""
    if compilerless and b"compile" in data and not FileInfo(path, b"").is_test:
        return True  # CDL106: torch.compile, or a name it is imported as (``from torch import compile``)
    return _file_checks(data, path)


def _file_checks(data: bytes, path: str) -> bool:
    """The checks that judge the file alone."""
    has = data.__contains__
    autocast, scaler = has(b"autocast"), has(b"GradScaler")
    if (autocast or scaler or has(b"custom_fwd") or has(b"custom_bwd")) and _amp_module(data):
        return True  # CDL001 (torch.cuda.amp.*)
    if has(b"experimental") and (
        has(b"mixed_precision.experimental") or has(b"import experimental") or has(b"mixed_precision as")
    ):
        return True  # CDL002
    if has(b"launch") and (has(b"distributed.launch") or has(b"import launch")):
        return True  # CDL006
    if (has(b"local_rank") or has(b"local-rank")) and has(b"add_argument"):
        return True  # CDL007
    if (
        has(b"CUDA_")
        and (has(b"CUDA_VISIBLE_DEVICES") or has(b"CUDA_DEVICE_ORDER"))
        and (has(b"environ") or has(b"putenv"))
    ):
        return True  # CDL011: an assignment to os.environ (or putenv)
    if has(b"jax") and jax_name().search(data) is not None:
        return True  # CDL012
    backward, loader, fit = has(b"backward"), has(b"DataLoader"), has(b".fit")
    scaler = scaler and autocast and has(b"bfloat16")
    if not (backward or loader or fit or scaler) or FileInfo(path, b"").is_test:
        return False  # the remaining checks need one of these, and do not judge tests
    if scaler:
        return True  # CDL005
    if backward and autocast and (has(b"autocast as") or AUTOCAST_CALL.search(data) is not None):
        # a float16 autocast: asked for (float16, half) or CUDA's default ("cuda", torch.cuda.amp)
        fp16 = has(b"float16") or has(b"half") or has(b'"cuda"') or has(b"'cuda'") or has(b"cuda.amp")
        if fp16 and not mentions(data, SCALER_EVIDENCE):
            return True  # CDL004
    if not any(has(t) for t in GPU_TOKENS):
        return False  # CDL003, CDL008-CDL010 all need GPU use
    if loader and TRAINING.search(data) is not None:
        return True  # CDL008, CDL009: a training loader
    # a training script: backward() and an optimizer step, or Keras fit() in a __main__ block …
    torch_trains = backward and has(b"step")
    tf_trains = fit and (has(b"tensorflow") or has(b"keras")) and MAIN_GUARD.search(data) is not None
    if not (torch_trains or tf_trains):
        return False
    # … for CDL003 (no precision evidence) or CDL010 (a conv model and no cuDNN setting)
    if mentions(data, AMP_EVIDENCE) and (has(b"cudnn") or not mentions(data, VISION_CONV)):
        return False
    return tf_trains or _torch_entry_point(data)


def _amp_module(data: bytes) -> bool:
    """torch.cuda.amp.X / torch.cpu.amp.X, written out or through an alias (``from torch.cuda import amp``,
    ``C.amp.X``): every spelling has an ``amp.`` that does not end a longer name, or ``import amp``."""
    if b"cuda.amp" in data or b"cpu.amp" in data or b"import amp" in data:
        return True
    at = data.find(b"amp.")
    while at >= 0:
        before = data[at - 1 : at]
        # ``torch.amp.`` is the current API; any other ``amp.`` may be torch.cuda.amp under a name
        if at == 0 or not (before.isalnum() or before == b"_" or data[max(0, at - 6) : at] == b"torch."):
            return True
        at = data.find(b"amp.", at + 4)
    return False


def _torch_entry_point(data: bytes) -> bool:
    """A ``__main__`` block, or a ``.backward(`` outside triple-quoted strings with no ``def`` line above it
    at a smaller indentation (erring towards yes: an unclosed string counts as module level)."""
    if b"__main__" in data and MAIN_GUARD.search(data) is not None:
        return True
    strings = _triple_quoted(data)
    if strings is None:
        return True
    lines: list[bytes] | None = None
    at = data.find(b"backward")
    while at >= 0:
        if _is_method_call(data, at) and not any(start <= at < end for start, end in strings):
            before = data[data.rfind(b"\n", 0, at) + 1 : at]  # the line up to the call
            indent = len(before) - len(before.lstrip(b" \t"))
            if indent == 0:
                return True
            lines = lines or data.split(b"\n")
            if not _inside_def(lines, data.count(b"\n", 0, at), indent):
                return True
        at = data.find(b"backward", at + 8)
    return False


def _is_method_call(data: bytes, at: int) -> bool:
    """``x.backward(``, with any spaces around the dot and before the parenthesis."""
    before = data[max(0, at - 40) : at].rstrip(b" \t")
    after = data[at + 8 : at + 48].lstrip(b" \t\r\n")
    return before.endswith(b".") and after.startswith(b"(")


def _triple_quoted(data: bytes) -> list[tuple[int, int]] | None:
    """The spans of triple-quoted strings, or None when one is not closed."""
    spans: list[tuple[int, int]] = []
    at = 0
    while True:
        double, single = data.find(b'"""', at), data.find(b"'''", at)
        if double < 0 and single < 0:
            return spans
        start, quote = (double, b'"""') if single < 0 or 0 <= double < single else (single, b"'''")
        end = data.find(quote, start + 3)
        if end < 0:
            return None
        spans.append((start, end + 3))
        at = end + 3


def _inside_def(lines: list[bytes], row: int, indent: int) -> bool:
    """Whether a ``def`` line encloses the line at ``row`` (by indentation)."""
    for above in range(row - 1, -1, -1):
        line = lines[above]
        stripped = line.lstrip()
        if not stripped or stripped.startswith(b"#"):
            continue
        level = len(line) - len(stripped)
        if level < indent:
            if DEF_LINE.match(line):
                return True
            if level == 0:
                return False
            indent = level
    return False
