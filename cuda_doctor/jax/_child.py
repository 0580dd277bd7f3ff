"""Report what JAX has installed, imports and chooses, from inside the target interpreter (standard
library and JAX only).  With CONFIG ``{"then": "wait", …}`` it then reports the backend and serves
orders from stdin (``childside.report.serve``).  Nothing here raises."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import platform
import re
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from cuda_doctor.base.childside.loaded import decode_cudart, decode_cudnn, dotted_version, loaded_libraries, read_maps
from cuda_doctor.base.childside.packages import Installed, installed, metadata_field, normalize, owners
from cuda_doctor.base.childside.report import (
    attempt,
    describe,
    end,
    miss,
    new_report,
    open_records,
    put,
    run_order,
    serve,
)

#: The distributions reported, by normalized name; CUDA plugins and PJRTs match PLUGIN_NAME.
JAX_DISTRIBUTIONS = ("jax", "jaxlib")
PLUGIN_NAME = re.compile(r"^jax-cuda(\d+)-(plugin|pjrt)$")
#: The plugin's components: (fact key, the name JAX's own messages use, _versions prefix).
COMPONENTS = (
    ("cuda", "CUDA", "cuda_runtime"), ("cudnn", "cuDNN", "cudnn"), ("cublas", "cuBLAS", "cublas"),
    ("cufft", "cuFFT", "cufft"), ("cusparse", "cuSPARSE", "cusparse"), ("cusolver", "cuSOLVER", "cusolver"),
    ("cupti", "cuPTI", "cupti"),
)  # fmt: skip
#: Where major ends in the other components' version numbers (cuBLAS 130000 → 13.0.0, cuFFT 12602 → 12.6.2).
MAJOR_STEP = {"cublas": 10000, "cufft": 1000, "cusparse": 1000, "cusolver": 1000}
#: Warning categories kept from ``import jax`` (DeprecationWarnings of its dependencies are not ours).
KEPT_WARNINGS = ("RuntimeWarning", "UserWarning")
MESSAGES_CAP = 20
MESSAGE_CHARS = 2000
STDERR_CAP = 64 << 10
#: XLA's C++ log lines (``E0000 00:00:…`` / ``W external/xla/…``) and the cuDNN mismatch text.
XLA_LOG_LINE = re.compile(r"^([EWF]\d{4} |[EWF] external/)|Loaded runtime CuDNN library")

#: The report's facts, grouped by the step that reads them.
VERSION_FACTS = ["jax.version", "jax.jaxlib_version", "jax.requires_jaxlib"]
DISTRIBUTION_FACTS = ["jax.distributions", "jax.shadowed_distributions"]
PLUGIN_FACTS = ["jax.cuda_plugins", "jax.cuda_plugin", "jax.cuda_plugin_version", "jax.cuda_plugin_major"]
PJRT_FACTS = ["jax.cuda_pjrt_version", "jax.plugin_requires_pjrt"]
IMPORT_FACTS = ["jax.import_error", "jax.import_seconds", "jax.import_warnings"]
STATIC_FACTS = [*VERSION_FACTS, *DISTRIBUTION_FACTS, *PLUGIN_FACTS, *PJRT_FACTS, "jax.plugin_build", *IMPORT_FACTS]
#: The backend report's facts, grouped by the step that reads them.
DEVICE_FACTS = ["jax.backend", "jax.platforms", "jax.devices", "jax.gpu_count", "jax.device_kinds"]
MESSAGE_FACTS = ["jax.cuda_error", "jax.backend_messages", "jax.backend_seconds"]
COMPONENT_FACTS = ["jax.cuda_components", "jax.driver_cuda"]
BACKEND_FACTS = [*DEVICE_FACTS, *MESSAGE_FACTS, *COMPONENT_FACTS, "jax.loaded_libraries"]


def whole(exc: BaseException) -> str:
    """The exception's type and its whole text (JAX's own messages span lines), within a cap."""
    text = str(exc).strip()
    return (type(exc).__name__ + (": " + text if text else ""))[:MESSAGE_CHARS]


def requirement_of(line: str, wanted: str) -> str | None:
    """``"jaxlib<=0.10.2,>=0.10.1"`` from a Requires-Dist line about ``wanted`` without an extra;
    None for a line about another name or one only an extra brings."""
    text, _, marker = line.partition(";")
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$", text)
    if match is None or normalize(match.group(1)) != wanted or "extra" in marker:
        return None
    return normalize(match.group(1)) + match.group(3).replace(" ", "")


def version_text(component: str, code: int) -> str:
    """A CUDA component's version number as the text its documentation uses."""
    if component in ("cuda", "driver"):
        return decode_cudart(code)
    if component == "cudnn":
        return decode_cudnn(code)
    if component in MAJOR_STEP:
        return dotted_version(code, MAJOR_STEP[component])
    return str(code)  # cuPTI's API version is a plain number


def xla_log_lines(text: str) -> list[str]:
    """XLA's own warnings and errors among what the backend printed on stderr."""
    return [line.strip()[:MESSAGE_CHARS] for line in text.splitlines() if XLA_LOG_LINE.search(line.strip())]


def kept_warnings(caught: list[Any]) -> list[str]:
    texts: list[str] = []
    for item in caught:
        category = getattr(getattr(item, "category", None), "__name__", "")
        text = str(getattr(item, "message", item)).strip()
        if category in KEPT_WARNINGS and text and text not in texts:
            texts.append(text[:MESSAGE_CHARS])
    return texts[:MESSAGES_CAP]


def is_jax_distribution(name: str) -> bool:
    return name in JAX_DISTRIBUTIONS or PLUGIN_NAME.match(name) is not None


def read_distributions(report: dict[str, dict[str, Any]]) -> dict[str, list[Installed]]:
    """Every copy of each JAX distribution on ``sys.path``, the one pip and importlib see first."""
    found = installed(sys.path, is_jax_distribution)
    put(report, "jax.distributions", {name: copies[0].version for name, copies in sorted(found.items())})
    shadowed = {name: [c.version for c in copies[1:]] for name, copies in sorted(found.items()) if len(copies) > 1}
    put(report, "jax.shadowed_distributions", shadowed)
    return found


def first(found: dict[str, list[Installed]], name: str) -> Installed | None:
    copies = found.get(name)
    return copies[0] if copies else None


def requires(dist: Installed | None, wanted: str) -> str | None:
    """``dist``'s own requirement on ``wanted`` (not one of an extra), from its METADATA."""
    if dist is None:
        return None
    lines = [requirement_of(line, wanted) for line in metadata_field(dist.metadata, "Requires-Dist")]
    return next((line for line in lines if line), None)


def put_versions(report: dict[str, dict[str, Any]], found: dict[str, list[Installed]]) -> None:
    jax, jaxlib = first(found, "jax"), first(found, "jaxlib")
    put(report, "jax.version", jax.version if jax else None)
    put(report, "jax.jaxlib_version", jaxlib.version if jaxlib else None)
    put(report, "jax.requires_jaxlib", requires(jax, "jaxlib"))


def put_plugins(report: dict[str, dict[str, Any]], found: dict[str, list[Installed]]) -> str | None:
    """Every CUDA plugin and its PJRT, and the one JAX uses (the newest major); returns its Python package."""
    plugins: list[dict[str, Any]] = []
    for name in sorted(found):
        match = PLUGIN_NAME.match(name)
        if match is None or match.group(2) != "plugin":
            continue
        major = int(match.group(1))
        pjrt_name = f"jax-cuda{major}-pjrt"
        plugin, pjrt = found[name][0], first(found, pjrt_name)
        record = {"name": name, "version": plugin.version, "major": major}
        record["pjrt_version"] = pjrt.version if pjrt else None
        record["requires_pjrt"] = requires(plugin, pjrt_name)
        plugins.append(record)
    plugins.sort(key=lambda plugin: -int(plugin["major"]))
    put(report, "jax.cuda_plugins", plugins)
    chosen = plugins[0] if plugins else {}
    put(report, "jax.cuda_plugin", chosen.get("name"))
    put(report, "jax.cuda_plugin_version", chosen.get("version"))
    put(report, "jax.cuda_plugin_major", chosen.get("major"))
    put(report, "jax.cuda_pjrt_version", chosen.get("pjrt_version"))
    put(report, "jax.plugin_requires_pjrt", chosen.get("requires_pjrt"))
    return f"jax_cuda{chosen['major']}_plugin" if chosen else None


def put_build(report: dict[str, dict[str, Any]], package: str | None) -> None:
    """The CUDA components the plugin was built with, from its own constants."""
    if package is None:
        put(report, "jax.plugin_build", None)
        return
    versions = importlib.import_module(package + "._versions")
    build: dict[str, str] = {}
    for key, _name, prefix in COMPONENTS:
        function = getattr(versions, prefix + "_build_version", None)
        if function is not None:
            build[key] = version_text(key, int(function()))
    put(report, "jax.plugin_build", build)


def import_jax(report: dict[str, dict[str, Any]], emit: Callable[[dict[str, Any]], None]) -> Any:
    emit({"step": "import jax"})
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import jax
        except BaseException as exc:  # jax checks jaxlib's version at import: RuntimeError
            put(report, "jax.import_error", whole(exc))
            miss(report, "jax.import_seconds", "import jax failed")
            put(report, "jax.import_warnings", kept_warnings(caught))
            return None
    put(report, "jax.import_seconds", round(time.monotonic() - start, 3))
    put(report, "jax.import_error", None)
    put(report, "jax.import_warnings", kept_warnings(caught))
    put(report, "jax.version", str(jax.__version__))  # the package imported, whatever metadata says
    try:
        import jaxlib.version

        put(report, "jax.jaxlib_version", str(jaxlib.version.__version__))
    except Exception as exc:  # keep the metadata's version, say nothing more
        miss(report, "jax.jaxlib_version", describe(exc))
    return jax


def collect(
    emit: Callable[[dict[str, Any]], None], autotune_cache: Any = None
) -> tuple[dict[str, dict[str, Any]], Any, str | None]:
    """The static report, the imported jax module (None when not imported) and the plugin's package."""
    report = new_report()
    put(report, "jax.python", sys.executable)
    put(report, "jax.python_version", platform.python_version())
    emit({"step": "read distributions"})
    found: dict[str, list[Installed]] = {}
    package: list[str | None] = [None]
    attempt(report, [*DISTRIBUTION_FACTS, "jax.installed"], lambda: found.update(read_distributions(report)))
    installed = "jax" in found or importlib.util.find_spec("jax") is not None
    put(report, "jax.installed", installed)
    if not installed:
        for name in STATIC_FACTS + BACKEND_FACTS:
            miss(report, name, "jax is not installed in " + sys.executable)
        return report, None, None
    attempt(report, VERSION_FACTS, lambda: put_versions(report, found))

    def plugins() -> None:
        package[0] = put_plugins(report, found)

    attempt(report, [*PLUGIN_FACTS, *PJRT_FACTS], plugins)
    attempt(report, ["jax.plugin_build"], lambda: put_build(report, package[0]))
    use_autotune_cache(autotune_cache)
    jax = None
    try:
        jax = import_jax(report, emit)
    except BaseException as exc:
        miss(report, "jax.import_error", describe(exc))
    if jax is None:
        why = "import jax failed: " + str(report["values"].get("jax.import_error") or "see jax.import_error")
        for name in BACKEND_FACTS:
            miss(report, name, why)
    return report, jax, package[0]


class Captured:
    """Warnings and errors logged while JAX chooses its backend (its loggers, XLA's lines on stderr), as text."""

    def __init__(self) -> None:
        import logging

        self.texts: list[str] = []

        class Handler(logging.Handler):
            def emit(handler, record: Any) -> None:
                text = record.getMessage()
                if record.exc_info and record.exc_info[1] is not None:
                    text += "\n" + "".join(traceback.format_exception_only(*record.exc_info[:2])).strip()
                self.add(text)

        self.handler = Handler(level=logging.WARNING)
        self.root = logging.getLogger()

    def add(self, text: str) -> None:
        text = text.strip()[:MESSAGE_CHARS]
        if text and text not in self.texts and len(self.texts) < MESSAGES_CAP:
            self.texts.append(text)

    def __enter__(self) -> Captured:
        import tempfile

        self.root.addHandler(self.handler)
        sys.stderr.flush()
        self.saved = os.dup(2)
        self.file = tempfile.TemporaryFile()
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.root.removeHandler(self.handler)
        self.file.seek(0)
        text = self.file.read(STDERR_CAP).decode("utf-8", "replace")
        self.file.close()
        os.write(2, text.encode("utf-8"))  # still on the child's stderr, for a parent reading its tail
        for line in xla_log_lines(text):
            self.add(line)


def cuda_error(texts: list[str], errors: dict[str, str]) -> str | None:
    """Why JAX has no CUDA backend, in JAX's words: the backend's own error, else the plugin's
    failed ``initialize()``, else JAX's CPU fallback warning."""
    if errors.get("cuda"):
        return str(errors["cuda"])[:MESSAGE_CHARS]
    needles = ("Exception when calling", "Jax plugin configuration error", "CUDA-enabled jaxlib", "CUDA backend")
    return next((text for needle in needles for text in texts if needle in text), None)


def device_record(device: Any) -> dict[str, Any]:
    return {"id": int(device.id), "platform": str(device.platform), "kind": str(getattr(device, "device_kind", ""))}


def backend(jax: Any, package: str | None, emit: Callable[[dict[str, Any]], None]) -> dict[str, dict[str, Any]]:
    report = new_report()
    emit({"step": "initialise the JAX backend"})
    start = time.monotonic()
    failure: BaseException | None = None
    devices: list[Any] = []
    with Captured() as captured, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            devices = list(jax.devices())
        except BaseException as exc:  # JAX_PLATFORMS=cuda without a working CUDA raises
            failure = exc
    for text in kept_warnings(caught):
        captured.add(text)
    put(report, "jax.backend_seconds", round(time.monotonic() - start, 3))
    put(report, "jax.backend_messages", captured.texts)
    bridge = importlib.import_module("jax._src.xla_bridge")
    errors = dict(getattr(bridge, "_backend_errors", {}) or {})
    if failure is not None:
        for name in DEVICE_FACTS:
            miss(report, name, whole(failure))
        put(report, "jax.cuda_error", cuda_error(captured.texts, errors) or whole(failure))
    else:
        put(report, "jax.backend", str(jax.default_backend()))
        attempt(report, ["jax.platforms"], lambda: put(report, "jax.platforms", sorted(bridge.backends())))
        records = [device_record(device) for device in devices]
        put(report, "jax.devices", records)
        gpus = [record for record in records if record["platform"] in ("gpu", "cuda")]
        put(report, "jax.gpu_count", len(gpus))
        put(report, "jax.device_kinds", [record["kind"] for record in gpus])
        put(report, "jax.cuda_error", None if gpus else cuda_error(captured.texts, errors))
    attempt(report, COMPONENT_FACTS, lambda: put_components(report, package))
    attempt(report, ["jax.loaded_libraries"], lambda: put_loaded(report))
    return report


def put_loaded(report: dict[str, dict[str, Any]]) -> None:
    """Every CUDA library mapped once the backend is up, with the distribution whose RECORD lists its
    file (None for one the loader found elsewhere: LD_LIBRARY_PATH, the system's folders)."""
    libraries = loaded_libraries(read_maps())
    candidates = installed(sys.path, lambda name: name.startswith("nvidia-") or is_jax_distribution(name))
    owned = owners([copy for copies in candidates.values() for copy in copies], [lib["path"] for lib in libraries])
    records = []
    for library in libraries:
        owner = owned.get(library["path"])
        record = {key: library[key] for key in ("library", "path", "soname", "version")}
        record["distribution"] = owner.name if owner else None
        record["distribution_version"] = owner.version if owner else None
        records.append(record)
    put(report, "jax.loaded_libraries", records)


def put_components(report: dict[str, dict[str, Any]], package: str | None) -> None:
    """The version of each CUDA component this process loads, beside the one the plugin was built with."""
    if package is None:
        put(report, "jax.cuda_components", None)
        put(report, "jax.driver_cuda", None)
        return
    versions = importlib.import_module(package + "._versions")
    components: dict[str, dict[str, Any]] = {}
    for key, name, prefix in COMPONENTS:
        build = getattr(versions, prefix + "_build_version", None)
        get = getattr(versions, prefix + "_get_version", None)
        if build is None or get is None:
            continue
        entry: dict[str, Any] = {"name": name, "build": version_text(key, int(build())), "runtime": None, "error": None}
        try:
            entry["runtime"] = version_text(key, int(get()))
        except Exception as exc:  # "cuDNN not found.": the library could not be loaded
            entry["error"] = describe(exc)
        components[key] = entry
    put(report, "jax.cuda_components", components)
    try:
        code = int(versions.cuda_driver_get_version())
    except Exception as exc:
        miss(report, "jax.driver_cuda", describe(exc))
        return
    put(report, "jax.driver_cuda", version_text("driver", code) if code else None)  # 0: no driver


def use_autotune_cache(folder: Any) -> None:
    """XLA keeps its GEMM autotuning results in ``folder``, made here; one that cannot be made is not named."""
    if not isinstance(folder, str) or not folder:
        return
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{flags} --xla_gpu_per_fusion_autotune_cache_dir={folder}".strip()


def main() -> None:
    records_fd, emit = open_records()
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    report, jax, package = collect(emit, config.get("autotune_cache"))
    emit(report)
    status = 0
    if jax is not None and config.get("then") == "wait":

        def answer(order: dict[str, Any]) -> bool:
            if "backend" in order:  # read again when asked again: the same backend
                emit({"backend": backend(jax, package, emit)})
                return True
            run_order(order, records_fd)
            return False  # the smoke step was the last order

        # the backend at once, as if asked, while the parent's other read-only probes run
        status = serve(answer, [{"backend": {}}])
    end(status)


if __name__ == "__main__":
    main()
