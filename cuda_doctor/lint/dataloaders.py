"""DataLoader settings (CDL008 workers, CDL009 pinned memory): only where they cost training time, that is
for a training loader on a GPU whose settings are not given and whose dataset does work per item."""

from __future__ import annotations

import ast
import re

from cuda_doctor.lint.findings import Hit, position
from cuda_doctor.lint.pyscan import LoaderSite, Scan, dotted

DECODING = re.compile(r"(?i)open|read|load|decode|transform|process|token|encode|augment|resize|crop|convert|extract")
TRAIN_NAME = re.compile(r"(?i)train")
EVAL_NAME = re.compile(r"(?i)eval|valid|^val|val_|_val\b|test|pred|infer|calib")
TOKENISING = re.compile(r"(?i)token|encode|processor")
SMALL_BATCH = 16  # items: a batch this small makes a copy too short for pinning to show
IN_MEMORY_DATASETS = frozenset(
    {"MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100", "SVHN", "USPS", "STL10"}
)
CHEAP_TRANSFORMS = frozenset({"ToTensor", "Normalize", "PILToTensor", "ConvertImageDtype", "Compose"})
DECODING_ARGS = frozenset({"transform", "transforms", "processor", "vis_processor", "image_processor", "tokenizer"})


def loader_hits(scan: Scan, pretrained: bool = False, script: bool = True) -> list[Hit]:
    """``pretrained``: the script calls ``from_pretrained``: a large pretrained model is fine-tuned, its
    step long enough that neither loading in the main process (CDL008) nor pageable copies (CDL009)
    are what the GPU waits on.  ``script``: the file is run (CDL009 judges only there: in a library
    module of several models and loaders, which loader feeds the vision model is not known)."""
    if not scan.loaders or not scan.uses_gpu or pretrained:
        return []
    hits: list[Hit] = []
    for loader in scan.loaders:
        call = loader.call
        given = {k.arg for k in call.keywords}
        batch = _arg(call, "batch_size")
        if None in given or _is_constant(batch, None) or not _training(scan, call, loader):
            continue  # **kwargs, or batch_size=None over pre-batched data: cannot tell
        workers, pinned = "num_workers" in given, "pin_memory" in given
        dataset = call.args[0] if call.args else _arg(call, "dataset")
        if not workers and dataset is not None and _decoding(scan, dataset, loader.function, call):
            pin = "" if pinned else " (with `pin_memory=True` for the host-to-device copies)"
            hits.append(Hit.make("CDL008", *position(call), detail="num_workers unset (defaults to 0)", pin=pin))
        elif workers and not pinned and scan.vision_model and script:
            # workers set: the author found loading heavy enough to move out of the main process
            size = batch if batch is not None else (call.args[1] if len(call.args) > 1 else None)
            small = type(size) is ast.Constant and isinstance(size.value, int) and size.value < SMALL_BATCH
            if not small and not _is_constant(_arg(call, "num_workers"), 0):
                hits.append(Hit.make("CDL009", *position(call), detail="without pin_memory"))
    return hits


def _arg(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_constant(node: ast.expr | None, value: object) -> bool:
    return type(node) is ast.Constant and node.value == value


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
        for scope in (function, 0):
            earlier = [v for v in scan.assigned.get((scope, node.id), []) if v.lineno < node.lineno]
            if earlier:
                return earlier[-1]
    return node


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
        # arrays held in memory (MNIST, CIFAR …) converted to tensors: little to do per item
        return transform is not None and (leaf not in IN_MEMORY_DATASETS or _transform_works(scan, transform, function))
    cls = scan.classes.get(leaf)
    if cls is not None:
        return _class_decodes(scan, cls, set())
    factory = scan.functions.get(leaf)
    if factory is not None and type(value.func) is ast.Name:
        return _calls(scan, factory, DECODING)
    if type(value.func) is ast.Name:
        if any(k.arg in DECODING_ARGS for k in value.keywords):
            return True  # built with a per-item processor, tokenizer or transform
        if value.args:  # a helper that wraps a dataset (``shuffle(ds)``, ``split(ds)``): that dataset
            return _decoding(scan, value.args[0], function, call, depth + 1)
    return False


def _transform_works(scan: Scan, transform: ast.expr, function: int) -> bool:
    """Whether a transform does more than convert and normalise; one that cannot be read counts as working."""
    value = _value(scan, transform, function)
    calls = [node for node in ast.walk(value) if type(node) is ast.Call]
    return not calls or any((dotted(c.func) or "?").rsplit(".", 1)[-1] not in CHEAP_TRANSFORMS for c in calls)


def _class_decodes(scan: Scan, cls: ast.ClassDef, seen: set[str]) -> bool:
    if cls.name in seen:
        return False
    seen.add(cls.name)
    for item in cls.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == "__getitem__":
            return _calls(scan, item, DECODING)
    for base in cls.bases:
        parent = scan.classes.get((dotted(base) or "").rsplit(".", 1)[-1])
        if parent is not None and _class_decodes(scan, parent, seen):
            return True
    return False


def _collate_decodes(scan: Scan, call: ast.Call, function: int) -> bool:
    """A collate function that tokenises each batch (``partial(f, tokenizer=…)``, or a function that calls one)."""
    collate = _arg(call, "collate_fn")
    if collate is None:
        return False
    value = _value(scan, collate, function)
    if type(value) is ast.Call and (dotted(value.func) or "").endswith("partial"):
        if any(k.arg in ("tokenizer", "processor") for k in value.keywords):
            return True
        value = value.args[0] if value.args else value
    name = dotted(value) if type(value) in (ast.Name, ast.Attribute) else None
    node = scan.functions.get((name or "").rsplit(".", 1)[-1])
    return node is not None and _calls(scan, node, TOKENISING)


def _calls(scan: Scan, function: ast.AST, names: re.Pattern[str]) -> bool:
    """Whether the function calls a name that ``names`` matches."""
    return any(names.search(n) for n in scan.function_calls.get(id(function), set()) if n)
