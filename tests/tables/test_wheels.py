"""The wheel table and every torch install command the rules can print.

The property test walks every combination the tables can express — each GPU architecture class,
each driver class, each installed torch release × CUDA variant (and a CPU-only build, and none)
— judges the rules that print an install command, and checks each command against an oracle
written here from the tables alone: the wheel exists for that release, has code for the GPU,
the driver runs it (fully, or through minor-version compatibility for native code), and the
interpreter's Python has a wheel of that release.  Where no wheel would run, the fix must say so
and name the driver upgrade.
"""

from __future__ import annotations

import itertools
import re
from functools import cache
from typing import Any, NamedTuple

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.results import Result, Status
from cuda_doctor.core.rules import judge_rule, load_rules
from cuda_doctor.framework.derive import derive_arch, derive_driver_support, derive_wheel_suggestion
from cuda_doctor.tables import load_table
from cuda_doctor.tables.driver import cuda_supported_by_driver
from cuda_doctor.tables.versions import nvidia_version

TABLE = load_table("torch_wheels")
DRIVERS = load_table("cuda_driver")
RULES = {rule.id: rule for rule in load_rules() if rule.id in ("CD102", "CD201", "CD204", "CD301")}
PYTHON = "/venv/bin/python"
PIP = f"{PYTHON} -m pip"
COMMAND = re.compile(
    r"(?P<pip>[^`&\s][^`&]*?) install 'torch==(?P<pin>[^']+)' --index-url https://download\.pytorch\.org/whl/(?P<variant>cu\d+)"
)
UPGRADE = re.compile(r"upgrade the NVIDIA driver to (?P<driver>[\d.]+) or newer")

Cap = tuple[int, int]


# -- the oracle: the tables, read without cuda_doctor's own logic --------------------------------


def _mm(text: str) -> Cap:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def _cuda_of(variant: str) -> Cap:
    digits = variant.removeprefix("cu")
    return int(digits[:-1]), int(digits[-1])


RELEASES = {row["torch"]: row for row in TABLE["release"]}
ROWS = {(row["torch"], row["variant"]): row for row in TABLE["wheel"]}


def has_code(row: dict[str, Any], cc: Cap) -> str | None:
    """'sass' / 'ptx' / None for one GPU, by CUDA's compatibility rules."""
    for entry in row["sass"]:
        arch = int(entry.removeprefix("sm_"))
        if arch // 10 == cc[0] and arch % 10 <= cc[1]:
            return "sass"
    for entry in row["ptx"]:
        arch = int(entry.removeprefix("compute_"))
        if (arch // 10, arch % 10) <= cc:
            return "ptx"
    return None


@cache
def ga_floor(cuda: Cap) -> str | None:
    rows = [r for r in DRIVERS["release"] if _mm(r["cuda"]) == cuda and r.get("linux")]
    return min((r["linux"] for r in rows), key=nvidia_version, default=None)  # type: ignore[arg-type]


@cache
def gpu_cuda(cc: Cap) -> Cap:
    needed = [_mm(r["cuda"]) for r in TABLE["gpu_min_cuda"] if cc >= _mm(r["capability"])]
    return max(needed, default=(0, 0))


@cache
def _driver_cuda(driver: str) -> Cap:
    return _mm(cuda_supported_by_driver(driver) or "0.0")


@cache
def runs(release: str, variant: str, cc: Cap, driver: str) -> bool:
    """Whether the wheel runs on this GPU and this driver."""
    row = ROWS[(release, variant)]
    code = has_code(row, cc)
    driver_cuda = _driver_cuda(driver)
    if code is None or driver_cuda < gpu_cuda(cc):
        return False
    cuda = _cuda_of(variant)
    full = cuda <= driver_cuda
    floors = {int(r["major"]): r["linux"] for r in DRIVERS["mvc"]}
    mvc = cuda[0] == driver_cuda[0] and nvidia_version(driver) >= nvidia_version(floors.get(cuda[0], "9999"))  # type: ignore[operator]
    return full or (mvc and code == "sass")


def python_has(release: str, python: Cap) -> bool:
    low, high = (_mm(v) for v in RELEASES[release]["python"])
    return low <= python <= high


@cache
def runnable(cc: Cap, driver: str, python: Cap, native: bool = False) -> list[tuple[str, str]]:
    return [
        (release, variant)
        for (release, variant), row in ROWS.items()
        if python_has(release, python)
        and runs(release, variant, cc, driver)
        and (not native or has_code(row, cc) == "sass")
    ]


# -- the combinations ---------------------------------------------------------------------------


def _signature(cc: Cap) -> tuple[Any, ...]:
    return (tuple(has_code(row, cc) for row in ROWS.values()), gpu_cuda(cc))


def _caps() -> list[Cap]:
    """One GPU of each class: GPUs every wheel treats alike (and that need the same CUDA) are one."""
    seen = {_mm(f"{int(a) // 10}.{int(a) % 10}") for row in ROWS.values() for a in _archs(row)}
    candidates = sorted(seen | {(m, n + 1) for m, n in seen} | {(3, 5), (13, 0)})
    classes: dict[tuple[Any, ...], Cap] = {}
    for cc in candidates:
        classes.setdefault(_signature(cc), cc)
    return sorted(classes.values())


def _archs(row: dict[str, Any]) -> list[str]:
    return [a.removeprefix("sm_") for a in row["sass"]] + [a.removeprefix("compute_") for a in row["ptx"]]


def _drivers() -> list[str]:
    """One driver of each class: the same newest CUDA and the same minor-version compatibility."""
    floors = {r["linux"] for r in DRIVERS["release"] if r.get("linux")} | {r["linux"] for r in DRIVERS["mvc"]}
    classes: dict[tuple[Any, ...], str] = {}
    for driver in sorted(floors, key=nvidia_version):  # type: ignore[arg-type]
        cuda = cuda_supported_by_driver(driver)
        if cuda is None:
            continue
        mvc = tuple(nvidia_version(driver) >= nvidia_version(r["linux"]) for r in DRIVERS["mvc"])  # type: ignore[operator]
        classes.setdefault((cuda, mvc), driver)
    return list(classes.values())


class Installed(NamedTuple):
    version: str | None  # "2.11.0"
    variant: str | None  # "cu130", "cpu", None (no torch)


def _installed() -> list[Installed]:
    found = [Installed(None, None)]
    for release, row in RELEASES.items():
        for variant in ["cpu", *row["variants"]]:
            found.append(Installed(f"{release}.0", variant))
    return found


CAPS = _caps()
DRIVER_LIST = _drivers()


def _facts(cc: Cap, driver: str, installed: Installed, python: str = "3.12.3") -> Facts:
    facts = Facts()
    values: dict[str, Any] = {
        "driver.status": "ok",
        "driver.version": driver,
        "driver.cuda_version": cuda_supported_by_driver(driver),
        "gpu.count": 1,
        "gpu[0].index": 0,
        "gpu[0].name": "GPU",
        "gpu[0].compute_capability": f"{cc[0]}.{cc[1]}",
        "framework.python": PYTHON,
        "framework.python_version": python,
        "torch.installed": installed.version is not None,
    }
    if installed.version is not None:
        cuda = None if installed.variant == "cpu" else _cuda_of(str(installed.variant))
        row = ROWS.get((installed.version.rsplit(".", 1)[0], str(installed.variant)))
        values.update(
            {
                "torch.version": f"{installed.version}+{installed.variant}",
                "torch.version_base": installed.version,
                "torch.cuda_build": None if cuda is None else f"{cuda[0]}.{cuda[1]}",
                "torch.arch_list": [] if row is None else row["sass"] + row["ptx"],
            }
        )
    for name, value in values.items():
        facts.set(name, value)
    return facts


def _judge(facts: Facts) -> list[Result]:
    derive_driver_support(facts)
    derive_wheel_suggestion(facts)
    derive_arch(facts)
    return [r for rule in RULES.values() for r in judge_rule(rule, facts)]


# -- checking what was printed ------------------------------------------------------------------


class Printed(NamedTuple):
    release: str
    variant: str
    pin: str
    driver: str  # the driver it is for: this one, or the one the fix upgrades to first


def printed_commands(result: Result, driver: str) -> list[Printed]:
    """Every torch install command of a result, with the driver it is for: a command quoted in
    the fix follows the driver upgrade the fix names; the listed commands are for this driver,
    unless the fix says to upgrade the driver and "then install" them."""
    fix = result.fix or ""
    upgrade = UPGRADE.search(fix)
    then = re.search(r"upgrade the NVIDIA driver to ([\d.]+) or newer \(Linux\), then install", fix)
    texts = [(c, then.group(1) if then else driver) for c in result.commands]
    texts += [(m.group(0), upgrade.group("driver") if upgrade else driver) for m in COMMAND.finditer(fix)]
    found = []
    for text, for_driver in texts:
        match = COMMAND.fullmatch(text)
        if match is None:
            continue
        assert match.group("pip") == PIP, f"{text!r} does not use the inspected interpreter"
        pin = match.group("pin")
        found.append(Printed(".".join(pin.split(".")[:2]), match.group("variant"), pin, for_driver))
    return found


def check_result(result: Result, cc: Cap, driver: str, installed: Installed, python: Cap) -> None:
    where = f"{result.rule_id} on {cc} with driver {driver}, torch {installed}: {result.fix} {result.commands}"
    printed = printed_commands(result, driver)
    installed_release = installed.version.rsplit(".", 1)[0] if installed.version else None
    for p in printed:
        assert p.release in RELEASES and p.variant in RELEASES[p.release]["variants"], f"no such wheel: {where}"
        assert (p.release, p.variant) in ROWS, where
        if p.release == installed_release:
            assert p.pin == installed.version, f"the installed release keeps its exact version: {where}"
        else:
            assert p.pin == f"{p.release}.*", where
            assert python_has(p.release, python), f"no wheel for Python {python}: {where}"
        assert has_code(ROWS[(p.release, p.variant)], cc), f"no code for {cc}: {where}"
        assert runs(p.release, p.variant, cc, p.driver), f"driver {p.driver} does not run it: {where}"
        assert (p.release, p.variant) != (installed_release, installed.variant), (
            f"suggests the installed wheel: {where}"
        )
        if p.driver != driver:  # the stated floor is exactly the one that wheel needs
            cuda = max(_cuda_of(p.variant), gpu_cuda(cc))
            assert p.driver == ga_floor(cuda), f"{p.driver} is not the floor for CUDA {cuda}: {where}"
    if result.status is not Status.FAIL and result.status is not Status.WARN:
        return
    now = [p for p in printed if p.driver == driver]
    _check_claims(result, cc, driver, installed, python, now, where)


def _check_claims(
    result: Result, cc: Cap, driver: str, installed: Installed, python: Cap, now: list[Printed], where: str
) -> None:
    """No command for this driver only where none exists; and then the fix says what to do."""
    fix = result.fix or ""
    if result.rule_id == "CD102" and "minor-version compatibility" in result.message:
        options = [(r, v) for r, v in runnable(cc, driver, python) if _cuda_of(v) <= _driver_cuda(driver)]
    else:
        native = result.rule_id == "CD301" and "PTX" in result.message
        options = runnable(cc, driver, python, native=native)
    if options and not now:
        assert "already the best" in fix, f"a wheel runs ({options[:3]}) but none is suggested: {where}"
    if not options:
        assert not now, where
        assert (
            "upgrade the NVIDIA driver to" in fix
            or "Upgrade the NVIDIA driver to" in fix
            or "Upgrade the driver to" in fix
            or "no PyTorch release in cuda-doctor's wheel table" in fix
            or "has a wheel for this Python" in fix
        ), f"no wheel runs and the fix does not say what to do: {where}"
    if "has a wheel for this Python" in fix:
        releases = {r for (r, _), row in ROWS.items() if has_code(row, cc)}
        assert releases and not any(python_has(r, python) for r in releases), where
    if "no PyTorch release in cuda-doctor's wheel table has native code" in fix:
        assert not any(has_code(row, cc) == "sass" for row in ROWS.values()), where
    elif "no PyTorch release in cuda-doctor's wheel table" in fix:
        assert not any(has_code(row, cc) for row in ROWS.values()), where


def _both_paths(result: Result, cc: Cap, driver: str, installed: Installed, python: Cap) -> None:
    """A CPU-only build whose release has a wheel for the GPU that this driver cannot run, while
    another release runs now: the fix offers both."""
    release = str(installed.version).rsplit(".", 1)[0]
    mine = [v for v in RELEASES[release]["variants"] if has_code(ROWS[(release, v)], cc)]
    if not mine or any(runs(release, v, cc, driver) for v in mine) or not runnable(cc, driver, python):
        return
    fix = result.fix or ""
    assert fix.startswith(f"Either keep torch {installed.version}: upgrade the NVIDIA driver to"), fix
    assert f"'torch=={installed.version}'" in fix and len(result.commands) == 2, (fix, result.commands)


# -- the tests ----------------------------------------------------------------------------------


def test_the_classes_cover_the_tables() -> None:
    named = [(3, 5), (3, 7), (5, 2), (6, 1), (7, 0), (7, 5), (8, 0), (8, 9), (9, 0), (10, 0), (12, 0), (12, 1), (13, 0)]
    covered = {_signature(cc) for cc in CAPS}
    assert all(_signature(cc) in covered for cc in named)
    assert len(DRIVER_LIST) >= 20


@pytest.mark.parametrize("cc", CAPS, ids=lambda cc: f"cc{cc[0]}.{cc[1]}")
def test_every_printed_install_command_works(cc: Cap) -> None:
    checked = 0
    for driver in DRIVER_LIST:
        for installed in _installed():
            python = _python_of(installed)
            for result in _judge(_facts(cc, driver, installed, f"{python[0]}.{python[1]}.0")):
                check_result(result, cc, driver, installed, python)
                if result.rule_id == "CD201" and result.status is Status.FAIL:
                    _both_paths(result, cc, driver, installed, python)
                checked += 1
    assert checked > 0


def _python_of(installed: Installed) -> Cap:
    """3.12, or the newest Python the installed release has wheels for."""
    if installed.version is None:
        return (3, 12)
    release = installed.version.rsplit(".", 1)[0]
    return (3, 12) if python_has(release, (3, 12)) else _mm(RELEASES[release]["python"][1])


@pytest.mark.parametrize("python", ["3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15"])
def test_a_new_install_has_a_wheel_for_the_interpreter(python: str) -> None:
    for cc in CAPS:
        for driver in DRIVER_LIST:
            facts = _facts(cc, driver, Installed(None, None), python=f"{python}.0")
            for result in _judge(facts):
                check_result(result, cc, driver, Installed(None, None), _mm(python))


@pytest.mark.parametrize("installed", [None, "1.13.0", "2.7.0", "2.14.0"])
def test_a_machine_with_two_kinds_of_gpu_gets_a_wheel_for_both(installed: str | None) -> None:
    torch = Installed(installed, None if installed is None else "cpu")
    for first, second in itertools.combinations(CAPS, 2):
        for driver in DRIVER_LIST:
            facts = _facts(first, driver, torch, "3.11.0")
            facts.set("gpu.count", 2)
            facts.set("gpu[1].index", 1)
            facts.set("gpu[1].compute_capability", f"{second[0]}.{second[1]}")
            for result in _judge(facts):
                if result.rule_id == "CD301":
                    continue  # per GPU: checked above
                for p in printed_commands(result, driver):
                    assert runs(p.release, p.variant, first, p.driver), (first, second, driver, result.commands)
                    assert runs(p.release, p.variant, second, p.driver), (first, second, driver, result.commands)


# -- the table itself -----------------------------------------------------------------------------


def test_every_variant_a_release_ships_has_its_arch_list_and_every_row_its_source() -> None:
    for release, row in RELEASES.items():
        for variant in row["variants"]:
            assert (release, variant) in ROWS, f"torch {release} {variant} has no [[wheel]] row"
        assert row["source"] and isinstance(row["verified"], bool)
        low, high = (_mm(v) for v in row["python"])
        assert low <= high
    for (release, variant), row in ROWS.items():
        assert variant in RELEASES[release]["variants"], f"{release} {variant}: not a variant of its release"
        assert row["source"] and isinstance(row["verified"], bool), (release, variant)
        assert all(re.fullmatch(r"sm_\d+", a) for a in row["sass"]), row
        assert all(re.fullmatch(r"compute_\d+", a) for a in row["ptx"]), row


def test_the_pypi_default_of_each_release_was_read_from_the_wheel() -> None:
    for release, row in RELEASES.items():
        default = "cu" + row["pypi_default"].replace(".", "")
        assert default in row["variants"], release
        wheel = ROWS[(release, default)]
        assert wheel["verified"] and "pypi_wheel" in wheel["source"], release


@cache
def _read_rows() -> dict[tuple[str, str], list[str]]:
    return {key: row["sass"] for key, row in ROWS.items() if row["verified"]}


@pytest.mark.parametrize(
    ("release", "variant", "present", "absent"),
    [
        ("2.11", "cu130", ["sm_75", "sm_120"], ["sm_70"]),  # the H200 recording's list
        ("2.10", "cu128", ["sm_70"], []),  # the last cu128 with Volta
        ("2.5", "cu124", ["sm_90"], []),
        ("1.13", "cu117", ["sm_37", "sm_86"], ["sm_90"]),
    ],
)
def test_rows_read_from_the_wheels(release: str, variant: str, present: list[str], absent: list[str]) -> None:
    row = _read_rows()[(release, variant)]
    assert set(present) <= set(row) and not set(absent) & set(row)


def test_no_release_lists_ptx_in_a_row_read_from_its_wheel() -> None:
    assert all(not row["ptx"] for row in ROWS.values() if row["verified"])
