"""torch's pinned CUDA wheels against the copies the interpreter resolves first (a folder on
``PYTHONPATH`` wins), pins with nothing installed, and CUDA families side by side."""

from __future__ import annotations

import os
import shlex

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.fixes import pip_of
from cuda_doctor.framework.libraries.common import (
    Pin,
    family,
    in_variable,
    missing,
    pip_install,
    same_path,
    satisfies,
    torch_pins,
    without_entry,
)

SUMMARY = ("derived.pins.count", "derived.pins.missing", "derived.pins.missing_command", "derived.cuda_families.mixed")


def derive(facts: Facts) -> None:
    if missing(facts, "torch.requires", *SUMMARY):
        return
    pins = torch_pins(facts)
    names = {facts.get(f"dist[{i}].name") for i in facts.indices("dist")}
    absent = [pin.requirement for name, pin in pins.items() if name not in names]
    facts.set("derived.pins.count", len(pins))
    facts.set("derived.pins.missing", absent)
    facts.set("derived.pins.missing_command", pip_install(facts, *absent) if absent else None)
    for index in facts.indices("dist"):
        _judge(facts, index, pins)
    _families(facts, pins)


def _judge(facts: Facts, index: int, pins: dict[str, Pin]) -> None:
    base = f"derived.dist[{index}]"
    name = str(facts.get(f"dist[{index}].name"))
    version = facts.get(f"dist[{index}].version")
    location = str(facts.get(f"dist[{index}].location") or "")
    shadowed = [c for c in facts.get(f"dist[{index}].shadowed") or [] if isinstance(c, dict)]
    facts.set(base + ".family", family(name))
    facts.set(base + ".shadowed_text", ", ".join(f"{c.get('version')} at {c.get('location')}" for c in shadowed))
    pin = pins.get(name)
    facts.set(base + ".pin", pin.requirement if pin else None)
    unpinned = "the framework itself" if name == "torch" else "torch pins no version of it"
    facts.set(base + ".pin_text", f"torch pins {pin.requirement}" if pin else unpinned)
    if pin is None:
        for key in ("pin_ok", "pinned_copy", "in_pythonpath", "path_command", "install_command"):
            facts.set(f"{base}.{key}", None)
        return
    facts.set(base + ".pin_via", pin.via)
    facts.set(base + ".pin_ok", satisfies(version, pin.specifier))
    good = next((c for c in shadowed if satisfies(c.get("version"), pin.specifier)), None)
    facts.set(base + ".pinned_copy", f"{good.get('version')} at {good.get('location')}" if good else None)
    pythonpath = facts.get("framework.pythonpath")
    on_path = in_variable(pythonpath, location)
    facts.set(base + ".in_pythonpath", on_path)
    facts.set(base + ".path_command", without_entry("PYTHONPATH", pythonpath, location) if on_path else None)
    facts.set(base + ".install_command", _install(facts, pin, location, on_path))


def _install(facts: Facts, pin: Pin, location: str, on_path: bool) -> str:
    """pip's command for the pinned version, in the place that copy resolves from."""
    paths = facts.get("framework.install_paths") or {}
    if on_path:  # once PYTHONPATH no longer lists that folder, site-packages is what resolves
        return pip_install(facts, pin.requirement)
    if paths.get("user") and same_path(location, str(paths["user"])):
        return pip_install(facts, pin.requirement, options="--user")
    if any(paths.get(key) and same_path(location, str(paths[key])) for key in ("purelib", "platlib")):
        return pip_install(facts, pin.requirement)
    return pip_install(facts, pin.requirement, options=f"--target {shlex.quote(location)} --upgrade --no-deps")


def _families(facts: Facts, pins: dict[str, Pin]) -> None:
    by_family: dict[str, list[str]] = {}
    for index in facts.indices("dist"):
        name = str(facts.get(f"dist[{index}].name"))
        tag = family(name)
        if tag:
            by_family.setdefault(tag, []).append(name)
    mixed = len(by_family) > 1
    facts.set("derived.cuda_families.mixed", mixed)
    for key in ("detail", "pinned", "others", "show_command", "uninstall_command", "overwritten", "restore_command"):
        facts.set(f"derived.cuda_families.{key}", None)
    if not mixed:
        return
    facts.set("derived.cuda_families.detail", "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(by_family.items())))
    pinned = {family(name) for name in pins} - {None}
    facts.set("derived.cuda_families.pinned", ", ".join(sorted(str(p) for p in pinned)) or None)
    others = [name for tag, names in sorted(by_family.items()) if tag not in pinned for name in names]
    if pinned and others:
        facts.set("derived.cuda_families.others", others)
        facts.set("derived.cuda_families.show_command", f"{pip_of(facts)} show {' '.join(others)}")
        facts.set("derived.cuda_families.uninstall_command", f"{pip_of(facts)} uninstall -y {' '.join(others)}")
        _overwritten(facts, pins, set(others))


def _overwritten(facts: Facts, pins: dict[str, Pin], others: set[str]) -> None:
    """Pinned wheels whose files another family's wheel lists too (it was unpacked over them):
    uninstalling that wheel deletes those files, so the pinned wheel is installed again after it."""
    texts: list[str] = []
    restore: list[str] = []
    for index in facts.indices("dist"):
        name = str(facts.get(f"dist[{index}].name"))
        shares = [s for s in facts.get(f"dist[{index}].shares_files") or [] if isinstance(s, dict)]
        intruders = [s for s in shares if s.get("name") in others]
        if name not in pins or not intruders:
            continue
        for share in intruders:
            files = ", ".join(os.path.basename(str(f)) for f in share.get("files") or [])
            more = int(share.get("count") or 0) - len(share.get("files") or [])
            texts.append(f"{share['name']} lists {files}{f' and {more} more' if more > 0 else ''} of {name}")
        restore.append(pins[name].requirement)
    if restore:
        facts.set("derived.cuda_families.overwritten", "; ".join(texts))
        command = pip_install(facts, *restore, options="--force-reinstall --no-deps")
        facts.set("derived.cuda_families.restore_command", command)
