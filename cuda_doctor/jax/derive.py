"""JAX's derived facts: the plugin this driver runs, whether the versions match, the loaded
libraries, the GPUs JAX should see, preallocation, the smoke figures.  Never raises."""

from __future__ import annotations

import re
from typing import Any

from cuda_doctor.core.facts import Facts, indexed, need
from cuda_doctor.core.fixes import pip_of
from cuda_doctor.tables import load_table
from cuda_doctor.tables.driver import min_driver_for_cuda, mvc_floor, newest_cuda
from cuda_doctor.tables.versions import at_least, major_minor

#: JAX reads these as "do not preallocate" (jaxlib/xla_client.py: any other value preallocates).
PREALLOCATE_OFF = ("false", "False", "0")
DEFAULT_FRACTION = 0.75
#: JAX's own floors for the CUDA components (``_check_cuda_versions``); cuDNN's is its build version.
FIXED_FLOORS = {"cuda": "12.1", "cublas": "12.1.0", "cusparse": "12.1.0"}


def _version(text: object) -> tuple[int, ...] | None:
    """The numeric prefix of a version (``0.10.2``, ``0.9.0.1``), as JAX's own checks parse it."""
    match = re.match(r"[0-9]+(?:\.[0-9]+)*", str(text or ""))
    return tuple(int(part) for part in match.group(0).split(".")) if match else None


def plugin_rows() -> dict[str, dict[str, Any]]:
    return {str(row["extra"]): row for row in load_table("jax")["plugin"]}


def plugin_floor(row: dict[str, Any]) -> str | None:
    """The lowest Linux driver that runs this plugin, from NVIDIA's table."""
    if "driver_cuda" in row:
        return min_driver_for_cuda(str(row["driver_cuda"]))
    return mvc_floor(int(row["driver_mvc"]))


def _runs(row: dict[str, Any], facts: Facts) -> str | None:
    """None when this plugin runs on this driver and these GPUs, else why not."""
    driver = facts.get("driver.version")
    driver_cuda = major_minor(newest_cuda(facts.get("driver.cuda_version"), driver))
    floor = plugin_floor(row)
    low = major_minor(row["min_capability"]) or (0, 0)
    if driver_cuda is not None and driver_cuda[0] < int(row["major"]):
        cuda = f"{driver_cuda[0]}.{driver_cuda[1]}"
        return f"it needs a driver for CUDA {row['major']} (≥ {floor}); driver {driver} supports CUDA {cuda}"
    if floor is not None and not at_least(driver, floor):
        return f"it needs driver ≥ {floor}; this one is {driver}"
    caps = (major_minor(facts.get(indexed("gpu", i, "compute_capability"))) for i in facts.indices("gpu"))
    old = sorted({cc for cc in caps if cc is not None and cc < low})
    if old:
        shown = ", ".join(f"{cc[0]}.{cc[1]}" for cc in old)
        return f"CUDA {row['major']} supports GPUs of compute capability {row['min_capability']} or newer, not {shown}"
    return None


def derive_plugin_choice(facts: Facts) -> None:
    out = "derived.jax.runs_extra"
    if not facts.has("driver.version"):
        facts.mark_all_unknown((out, "derived.jax.install_command"), facts.unknown_reason("driver.version"))
        return
    driver = facts.get("driver.version")
    rows = plugin_rows()
    floors = {extra: plugin_floor(row) for extra, row in rows.items()}
    facts.set("derived.jax.cuda13_floor", floors.get("cuda13"))
    facts.set("derived.jax.cuda12_floor", floors.get("cuda12"))
    why_not = {extra: _runs(row, facts) for extra, row in rows.items()}
    pip = pip_of(facts)
    for extra in ("cuda13", "cuda12"):
        if why_not.get(extra) is None and extra in rows:
            facts.set(out, extra)
            facts.set("derived.jax.install_command", f'{pip} install -U "jax[{extra}]"')
            if extra == "cuda13":
                note = f"jax[cuda12] also runs here (drivers ≥ {floors['cuda12']})"
            else:
                note = f"jax[cuda13] would need driver ≥ {floors['cuda13']}: {why_not['cuda13']}"
            facts.set("derived.jax.choice_note", note)
            return
    reason = f"no JAX CUDA plugin runs on driver {driver}: jax[cuda12] needs ≥ {floors.get('cuda12')}"
    reason += f" ({why_not.get('cuda12')})"
    facts.mark_all_unknown((out, "derived.jax.install_command"), reason + "; only a driver upgrade helps")
    facts.mark_unknown("derived.jax.choice_note", reason)


def derive_plugin_driver(facts: Facts) -> None:
    """Whether the installed plugin's CUDA major is one this driver runs, and the swap if not."""
    out = "derived.jax.plugin_runs"
    if not need(facts, out, "jax.cuda_plugin_major"):
        return
    major = facts.get("jax.cuda_plugin_major")
    if major is None:
        facts.set(out, None)  # no plugin: CPU-only, another rule says so
        return
    row = plugin_rows().get(f"cuda{major}")
    if row is None:
        facts.mark_unknown(out, f"no driver floor known for jax-cuda{major}-plugin")
        return
    if not need(facts, out, "driver.version"):
        return
    facts.set("derived.jax.plugin_driver_floor", plugin_floor(row))
    problem = _runs(row, facts)
    facts.set(out, problem is None)
    facts.set("derived.jax.plugin_problem", problem)
    if problem is None:
        return
    facts.set("derived.jax.uninstall_command", f"{pip_of(facts)} uninstall -y {row['package']} {row['pjrt']}")
    extra = facts.get("derived.jax.runs_extra")
    facts.set("derived.jax.other_plugin_runs", isinstance(extra, str) and extra != f"cuda{major}")


def _release(version: tuple[int, ...]) -> dict[str, Any] | None:
    return next((dict(row) for row in load_table("jax")["releases"]["rows"] if _version(row["jax"]) == version), None)


def version_problems(facts: Facts) -> list[str]:
    """What does not match among jax, jaxlib, the CUDA plugin and its PJRT, in JAX's terms."""
    problems: list[str] = []
    jax, jaxlib = facts.get("jax.version"), facts.get("jax.jaxlib_version")
    failed = str(facts.get("jax.import_error") or "")
    if "jaxlib" in failed and ("incompatible" in failed or "requires version" in failed):
        problems.append(f"import jax fails: {failed}")
    elif jax and jaxlib and facts.get("jax.requires_jaxlib"):
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            wanted = Requirement(str(facts.get("jax.requires_jaxlib")))
        except InvalidRequirement:
            wanted = None
        if wanted is not None and not wanted.specifier.contains(str(jaxlib), prereleases=True):
            problems.append(f"jaxlib {jaxlib} is not what jax {jax} requires ({wanted})")
    elif jax and not jaxlib:
        problems.append(f"jax {jax} is installed without jaxlib")
    plugin, version = facts.get("jax.cuda_plugin"), facts.get("jax.cuda_plugin_version")
    if plugin and jaxlib and _version(version) != _version(jaxlib):
        said = next((w for w in facts.get("jax.import_warnings") or [] if "not be used" in str(w)), None)
        text = f"{plugin} {version} does not match jaxlib {jaxlib}, so JAX does not use it"
        problems.append(text + (f" ({said})" if said else ""))
    pjrt, pinned = facts.get("jax.cuda_pjrt_version"), facts.get("jax.plugin_requires_pjrt")
    if plugin and pjrt is None:
        needs = pinned or str(plugin).replace("-plugin", "-pjrt")
        problems.append(f"{plugin} {version} is installed without its PJRT ({needs}): JAX has no CUDA backend")
    elif plugin and _version(pjrt) != _version(version):
        problems.append(f"{plugin} {version} requires {pinned}, but {pjrt} is installed")
    return problems


def derive_versions(facts: Facts) -> None:
    installed = facts.get("jax.installed")
    if not installed:
        reason = "jax is not installed" if installed is False else facts.unknown_reason("jax.installed")
        facts.mark_unknown("derived.jax.versions_match", reason)
        return
    needed = ("jax.version", "jax.jaxlib_version", "jax.cuda_plugin", "jax.cuda_pjrt_version")
    if not need(facts, "derived.jax.versions_match", *needed):
        return
    problems = version_problems(facts)
    facts.set("derived.jax.version_problems", problems)
    facts.set("derived.jax.version_problem_text", "; ".join(problems) or None)
    facts.set("derived.jax.versions_match", not problems)
    facts.set("derived.jax.versions_text", versions_text(facts))
    if problems:
        facts.set("derived.jax.align_command", align_command(facts))


def versions_text(facts: Facts) -> str:
    """``jax 0.11.2, jaxlib 0.11.2, jax-cuda13-plugin 0.11.2, jax-cuda13-pjrt 0.11.2``."""
    parts = [f"jax {facts.get('jax.version')}", f"jaxlib {facts.get('jax.jaxlib_version')}"]
    plugin = facts.get("jax.cuda_plugin")
    if plugin:
        parts.append(f"{plugin} {facts.get('jax.cuda_plugin_version')}")
        pjrt = str(plugin).replace("-plugin", "-pjrt")
        parts.append(f"{pjrt} {facts.get('jax.cuda_pjrt_version') or '(missing)'}")
    return ", ".join(parts)


def align_command(facts: Facts) -> str:
    """One pip command that installs a matching set: the newest of the installed versions, whose
    extras pin jaxlib and the plugin exactly; the newest release when our table does not know it."""
    pip = pip_of(facts)
    versions = [facts.get(name) for name in ("jax.version", "jax.jaxlib_version", "jax.cuda_plugin_version")]
    parsed = [v for v in (_version(text) for text in versions if text) if v]
    target = max(parsed) if parsed else None
    row = _release(target) if target else None
    major = facts.get("jax.cuda_plugin_major")
    if major:
        extra = f"cuda{major}"
        if row is not None and (major != 13 or row.get("cuda13")):
            return f'{pip} install -U "jax[{extra}]=={row["jax"]}"'
        return f'{pip} install -U "jax[{extra}]"'
    if row is not None:
        return f'{pip} install "jax=={row["jax"]}" "jaxlib=={row["jaxlib"]}"'
    return f"{pip} install -U jax jaxlib"


#: The plugin's component → the library key of ``jax.loaded_libraries`` (childside.loaded).
LOADED_KEY = {"cuda": "cudart", "cudnn": "cudnn", "cublas": "cublas", "cufft": "cufft", "cusparse": "cusparse"}


def loaded_from(key: str, loaded: object) -> str:
    """Where the process loaded a component's library from, and which wheel owns that file."""
    for record in loaded if isinstance(loaded, list) else []:
        if isinstance(record, dict) and record.get("library") == LOADED_KEY.get(key):
            path, owner = record.get("path"), record.get("distribution")
            if owner:
                return f" (loaded from {path}, of {owner} {record.get('distribution_version')})"
            return f" (loaded from {path}, which no installed wheel owns: LD_LIBRARY_PATH or the system's folders)"
    return ""


def library_problems(components: dict[str, Any], plugin: str, loaded: object = None) -> list[str]:
    problems: list[str] = []
    for key, entry in sorted(components.items()):
        if not isinstance(entry, dict):
            continue
        name, build, runtime = entry.get("name", key), entry.get("build"), entry.get("runtime")
        if key == "cudnn" and runtime is None:
            error = entry.get("error")
            problems.append(f"{name} could not be loaded ({error}); {plugin} needs {name} {build} or a newer 9.x")
            continue
        if runtime is None:
            continue
        source = loaded_from(key, loaded)
        if key == "cudnn":
            have, built = _version(runtime) or (), _version(build) or ()
            if have[:1] != built[:1] or have[:2] < built[:2]:
                problems.append(
                    f"{name} {runtime} is loaded{source}, but {plugin} was built with {build}: XLA needs the same"
                    " major version and an equal or higher minor"
                )
        elif key in FIXED_FLOORS and (_version(runtime) or ()) < (_version(FIXED_FLOORS[key]) or ()):
            problems.append(
                f"{name} {runtime} is loaded{source}; JAX needs {name} ≥ {FIXED_FLOORS[key]} (built with {build})"
            )
    return problems


def derive_libraries(facts: Facts) -> None:
    out = "derived.jax.libraries_ok"
    if not need(facts, out, "jax.cuda_components"):
        return
    components = facts.get("jax.cuda_components")
    if not isinstance(components, dict):
        facts.set(out, None)  # no CUDA plugin: nothing was loaded for one
        return
    plugin = f"{facts.get('jax.cuda_plugin')} {facts.get('jax.cuda_plugin_version')}"
    problems = library_problems(components, plugin, facts.get("jax.loaded_libraries"))
    facts.set("derived.jax.library_problems", problems)
    facts.set("derived.jax.library_problem_text", "; ".join(problems) or None)
    facts.set(out, not problems)
    loaded = [
        f"{e.get('name')} {e.get('runtime')}" for e in components.values() if isinstance(e, dict) and e.get("runtime")
    ]
    facts.set("derived.jax.libraries_text", ", ".join(loaded) or "none")
    major, version = facts.get("jax.cuda_plugin_major"), facts.get("jax.version")
    if major and version:
        facts.set("derived.jax.reinstall_command", f'{pip_of(facts)} install -U "jax[cuda{major}]=={version}"')


def derive_visibility(facts: Facts) -> None:
    out = "derived.jax.expected_gpus"
    visible = facts.get("derived.cvd.visible")
    expected = visible if isinstance(visible, int) else facts.get("gpu.count")
    if not isinstance(expected, int):
        facts.mark_unknown(out, facts.unknown_reason("gpu.count"))
        return
    facts.set(out, expected)
    seen = facts.get("jax.gpu_count")
    if isinstance(seen, int):
        facts.set("derived.jax.gpu_shortfall", seen < expected)
    elif not facts.has("jax.gpu_count"):
        facts.mark_unknown("derived.jax.gpu_shortfall", facts.unknown_reason("jax.gpu_count"))
    env = facts.get("jax.env")
    platforms = env.get("JAX_PLATFORMS") if isinstance(env, dict) else None
    facts.set("derived.jax.platforms_setting", platforms)
    error = facts.get("jax.cuda_error")
    if platforms and "cuda" not in str(platforms) and "gpu" not in str(platforms):
        reason = f"JAX_PLATFORMS={platforms} keeps JAX off the GPU"
    elif error:
        reason = f"JAX said: {error}"
    else:
        reason = f"JAX's backend is {facts.get('jax.backend') or 'unknown'} and it gave no reason"
    facts.set("derived.jax.gpu_reason", reason)


def derive_memory(facts: Facts) -> None:
    env = facts.get("jax.env")
    if not isinstance(env, dict):
        facts.mark_unknown("derived.jax.preallocate", facts.unknown_reason("jax.env"))
        return
    preallocate = str(env.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true")) not in PREALLOCATE_OFF
    facts.set("derived.jax.preallocate", preallocate)
    facts.set("derived.jax.preallocate_setting", env.get("XLA_PYTHON_CLIENT_PREALLOCATE", "unset"))
    facts.set("derived.jax.xla_flags", env.get("XLA_FLAGS") or "none")
    raw = env.get("XLA_CLIENT_MEM_FRACTION", env.get("XLA_PYTHON_CLIENT_MEM_FRACTION"))
    try:
        fraction = DEFAULT_FRACTION if raw is None else float(raw)
    except ValueError:
        facts.mark_unknown("derived.jax.mem_fraction", f"XLA_PYTHON_CLIENT_MEM_FRACTION={raw!r} is not a number")
        return
    facts.set("derived.jax.mem_fraction", fraction)
    facts.set("derived.jax.mem_percent", round(100 * fraction))
    for i in facts.indices("gpu"):
        total = facts.get(indexed("gpu", i, "memory_total_mib"))
        if isinstance(total, int):
            facts.set(f"derived.gpu[{i}].jax_prealloc_mib", round(total * fraction))
        procs = facts.get(indexed("gpu", i, "processes"))
        if isinstance(procs, list):
            used = [p.get("used_mib") for p in procs if isinstance(p, dict)]
            facts.set(f"derived.gpu[{i}].others_mib", round(sum(u for u in used if isinstance(u, (int, float)))))
        busy = facts.get(indexed("gpu", i, "memory_used_mib"))
        if isinstance(total, int) and total > 0 and isinstance(busy, int):
            # a fraction that fits beside what is used now, with a tenth of the rest to spare
            fit = max(int((total - busy) / total * 90), 5) / 100
            facts.set(f"derived.gpu[{i}].jax_fraction_fit", f".{round(fit * 100):02d}")


def derive_smoke(facts: Facts) -> None:
    """``derived.smoke[i].jax_bf16_ratio``: the JAX matmul against the expected bf16 figure."""
    from cuda_doctor.smoke.expected import expected_figures, find_row

    table = load_table("gpu_expected")
    for i in facts.indices("smoke"):
        measured = facts.get(indexed("smoke", i, "jax_bf16_tflops"))
        if not facts.has(indexed("smoke", i, "jax_kind")) and measured is None:
            continue
        out = f"derived.smoke[{i}].jax_bf16_ratio"
        kind = facts.get(indexed("smoke", i, "jax_kind")) or facts.get(indexed("smoke", i, "name"))
        row = find_row(table, str(kind)) if kind else None
        if row is None:
            facts.mark_unknown(out, f"no expected figures for {kind} in rules/data/gpu_expected.toml")
            continue
        expected = expected_figures(table, row).get("bf16_tflops")
        if not isinstance(measured, (int, float)) or isinstance(measured, bool) or not expected:
            why = facts.reason(indexed("smoke", i, "jax_bf16_tflops")) or "the JAX bf16 matmul was not measured"
            facts.mark_unknown(out, why)
            continue
        facts.set(f"derived.smoke[{i}].jax_expected_model", row["model"])
        facts.set(f"derived.smoke[{i}].jax_expected_kind", row["kind"])
        facts.set(f"derived.smoke[{i}].jax_expected_bf16_tflops", expected)
        facts.set(out, round(measured / expected, 2))
        facts.set(f"derived.smoke[{i}].jax_bf16_percent", round(100 * measured / expected))


def derive(facts: Facts) -> None:
    """Every JAX deriver, in order (the plugin choice first: the swap commands use it)."""
    for step in (derive_plugin_choice, derive_plugin_driver, derive_versions, derive_libraries):
        step(facts)
    for step in (derive_visibility, derive_memory, derive_smoke):
        step(facts)
