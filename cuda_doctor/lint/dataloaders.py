"""DataLoader settings (CDL008 workers, CDL009 pinned memory): only where they cost training time.

A loader is judged only when it feeds training on a GPU (the script steps an optimizer and puts
work on a GPU; the loader shuffles, samples randomly or is named for training), its settings are
not given (an explicit value, even ``num_workers=0``, is a decision), and its dataset does work
per item: a dataset class of the same file whose ``__getitem__`` opens, decodes, transforms or
tokenises, a torchvision dataset with a transform, or a ``with_transform`` dataset.  Tensors in
memory (``TensorDataset``), already on the GPU, strings or a pre-tokenised dataset leave nothing
for workers to do, and pinning GPU tensors raises.  One finding per call site.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from cuda_doctor.lint.findings import Hit
from cuda_doctor.lint.pyscan import LoaderSite, Scan, dotted

DECODING = re.compile(r"(?i)open|read|load|decode|transform|process|token|encode|augment|resize|crop|convert|extract")
TRAIN_NAME = re.compile(r"(?i)train")
EVAL_NAME = re.compile(r"(?i)eval|valid|^val|val_|_val\b|test|pred|infer|calib")
SMALL_BATCH = 16  # items: a batch this small makes a copy too short for pinning to show


@dataclass(frozen=True)
class Site:
    """What one DataLoader call says about itself."""

    workers: bool  # num_workers= given
    pin: bool  # pin_memory= given
    unknown: bool  # **kwargs, or batch_size=None over pre-batched data
    training: bool
    decoding: bool  # its dataset does work per item
    cv: bool  # the file builds an image model
    small_batch: bool  # a constant batch size below SMALL_BATCH


def loader_hits(scan: Scan, pretrained: bool = False) -> list[Hit]:
    """``pretrained``: the script fine-tunes a ``from_pretrained`` model (a large transformer or
    diffusion model), whose step is long enough that pinning barely shows."""
    if not scan.loaders or not scan.uses_gpu:
        return []
    hits: list[Hit] = []
    for loader in scan.loaders:
        site = describe(scan, loader)
        if site.unknown or not site.training:
            continue
        call = loader.call
        line, column = call.lineno, call.col_offset + 1
        if not site.workers and site.decoding:
            pin = "" if site.pin else " (with `pin_memory=True` for the host-to-device copies)"
            hits.append(Hit.make("CDL008", line, column, detail="num_workers unset (defaults to 0)", pin=pin))
        elif (
            site.workers and not site.pin and site.cv and not site.small_batch and not pretrained and _workers_on(call)
        ):
            # workers set: the author found loading heavy enough to move out of the main process
            hits.append(Hit.make("CDL009", line, column, detail="without pin_memory"))
    return hits


def describe(scan: Scan, loader: LoaderSite) -> Site:
    call = loader.call
    given = {k.arg for k in call.keywords}
    unknown = None in given or any(
        k.arg == "batch_size" and type(k.value) is ast.Constant and k.value.value is None for k in call.keywords
    )
    dataset = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "dataset"), None)
    return Site(
        workers="num_workers" in given,
        pin="pin_memory" in given,
        unknown=unknown,
        training=_training(scan, call, loader),
        decoding=dataset is not None and _decoding(scan, dataset, loader.function, call),
        cv=scan.vision_model,
        small_batch=_small_batch(call),
    )


def _small_batch(call: ast.Call) -> bool:
    size = next((k.value for k in call.keywords if k.arg == "batch_size"), call.args[1] if len(call.args) > 1 else None)
    return type(size) is ast.Constant and isinstance(size.value, int) and size.value < SMALL_BATCH


def _workers_on(call: ast.Call) -> bool:
    workers = next((k.value for k in call.keywords if k.arg == "num_workers"), None)
    return not (type(workers) is ast.Constant and workers.value == 0)


def _training(scan: Scan, call: ast.Call, loader: LoaderSite) -> bool:
    target = loader.target
    if target and EVAL_NAME.search(target) and not TRAIN_NAME.search(target):
        return False
    for item in call.keywords:
        if item.arg == "shuffle":
            return type(item.value) is not ast.Constant or item.value.value is not False
        if item.arg in ("sampler", "batch_sampler"):
            text = ast.unparse(_value(scan, item.value, loader.function))
            return "Sequential" not in text and not EVAL_NAME.search(text)
    return bool(target and TRAIN_NAME.search(target))


def _value(scan: Scan, node: ast.expr, function: int) -> ast.expr:
    """A name's value: its last assignment above the use, in the same function (else at module
    level); ``ds = shuffle(ds)`` follows to the assignment before."""
    if type(node) is ast.Subscript:
        node = node.value  # ``datasets["train"]``: the datasets object
    if type(node) is ast.Name:
        line = node.lineno
        for scope in (function, 0):
            earlier = [v for v in scan.assigned.get((scope, node.id), []) if v.lineno < line]
            if earlier:
                return earlier[-1]
    return node


DECODING_ARGS = frozenset({"transform", "transforms", "processor", "vis_processor", "image_processor", "tokenizer"})


def _decoding(scan: Scan, dataset: ast.expr, function: int, call: ast.Call, depth: int = 0) -> bool:
    if depth == 0 and _collate_decodes(scan, call, function):
        return True
    value = _value(scan, dataset, function)
    if type(value) is not ast.Call or depth > 4:
        return False
    source = ast.unparse(value.func)
    if "with_transform" in source or "set_transform" in source:
        return True
    name = dotted(value.func) or ""
    qual = scan.resolve(name)
    leaf = name.rsplit(".", 1)[-1]
    if qual.startswith("torchvision.datasets.") or qual.endswith(".ImageFolder"):
        transform = next((k.value for k in value.keywords if k.arg in ("transform", "transforms")), None)
        if transform is None:
            return False
        # arrays held in memory (MNIST, CIFAR …) converted to tensors: little to do per item
        return leaf not in IN_MEMORY_DATASETS or _transform_works(scan, transform, function)
    cls = scan.classes.get(leaf)
    if cls is not None:
        return _class_decodes(scan, cls, set())
    factory = scan.functions.get(leaf)
    if factory is not None and type(value.func) is ast.Name:
        return any(DECODING.search(n) for n in scan.function_calls.get(id(factory), set()) if n)
    if type(value.func) is ast.Name:
        if any(k.arg in DECODING_ARGS for k in value.keywords):
            return True  # built with a per-item processor, tokenizer or transform
        if value.args:  # a helper that wraps a dataset (``shuffle(ds)``, ``split(ds)``): that dataset
            return _decoding(scan, value.args[0], function, call, depth + 1)
    return False


IN_MEMORY_DATASETS = frozenset(
    {"MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100", "SVHN", "USPS", "STL10"}
)
CHEAP_TRANSFORMS = frozenset({"ToTensor", "Normalize", "PILToTensor", "ConvertImageDtype", "Compose"})


def _transform_works(scan: Scan, transform: ast.expr, function: int) -> bool:
    """Whether a transform does more than convert and normalise (crops, resizes, flips …);
    one that cannot be read counts as working."""
    value = _value(scan, transform, function)
    calls = [node for node in ast.walk(value) if type(node) is ast.Call]
    if not calls:
        return True
    return any((dotted(c.func) or "?").rsplit(".", 1)[-1] not in CHEAP_TRANSFORMS for c in calls)


def _class_decodes(scan: Scan, cls: ast.ClassDef, seen: set[str]) -> bool:
    if cls.name in seen:
        return False
    seen.add(cls.name)
    for item in cls.body:
        if type(item) in (ast.FunctionDef, ast.AsyncFunctionDef) and item.name == "__getitem__":  # type: ignore[attr-defined]
            names = scan.function_calls.get(id(item), set())
            return any(DECODING.search(n) for n in names if n)
    for base in cls.bases:
        parent = scan.classes.get((dotted(base) or "").rsplit(".", 1)[-1])
        if parent is not None and _class_decodes(scan, parent, seen):
            return True
    return False


def _collate_decodes(scan: Scan, call: ast.Call, function: int) -> bool:
    """A collate function that tokenises each batch (``functools.partial(f, tokenizer=…)`` or a
    function of the file that calls a tokenizer)."""
    collate = next((k.value for k in call.keywords if k.arg == "collate_fn"), None)
    if collate is None:
        return False
    value = _value(scan, collate, function)
    if type(value) is ast.Call and (dotted(value.func) or "").endswith("partial"):
        if any(k.arg in ("tokenizer", "processor") for k in value.keywords):
            return True
        value = value.args[0] if value.args else value
    name = dotted(value) if type(value) in (ast.Name, ast.Attribute) else None
    node = scan.functions.get((name or "").rsplit(".", 1)[-1])
    if node is None:
        return False
    return any(re.search(r"(?i)token|encode|processor", n) for n in scan.function_calls.get(id(node), set()) if n)
