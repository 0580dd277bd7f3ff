"""The registries: every probe, deriver, command and format they name imports, and a misspelt
name fails loudly instead of being skipped."""

from __future__ import annotations

import importlib

import pytest

from cuda_doctor.commands import COMMANDS
from cuda_doctor.core import families
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.families import DERIVERS, FAMILIES, PROBES, about, load, provider
from cuda_doctor.core.pipeline import derive_all
from cuda_doctor.core.rules import load_rules
from cuda_doctor.report import check, compare, watch


@pytest.mark.parametrize("name", sorted(PROBES))
def test_every_registered_probe_imports_and_is_named_as_registered(name: str) -> None:
    probe = load(PROBES[name].module)
    assert probe.name == name
    assert callable(probe.applies) and callable(probe.collect)


@pytest.mark.parametrize("spec", [spec for spec, _inputs in DERIVERS])
def test_every_registered_deriver_imports(spec: str) -> None:
    assert callable(load(spec))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_registered_command_imports(name: str) -> None:
    assert importlib.import_module(COMMANDS[name]).command.name == name


@pytest.mark.parametrize(
    ("table", "function"),
    [
        *[(module, "render") for module in check.FORMATS.values()],
        *[(module, "render_diff") for module in compare.FORMATS.values()],
        *[(module, "render_fleet") for module in compare.FLEET_FORMATS.values()],
        *[(module, "render") for module in watch.FORMATS.values()],
    ],
)
def test_every_registered_format_imports(table: str, function: str) -> None:
    assert callable(getattr(importlib.import_module(table), function))


def test_a_misspelt_registry_entry_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModuleNotFoundError):
        load("cuda_doctor.gpu.no_such_module")
    with pytest.raises(AttributeError):
        load("cuda_doctor.gpu.visible_devices:no_such_deriver")
    monkeypatch.setattr(families, "DERIVERS", [("cuda_doctor.host.derive:derive_typo", ())])
    monkeypatch.setattr("cuda_doctor.core.pipeline.DERIVERS", families.DERIVERS)
    with pytest.raises(AttributeError):
        derive_all(Facts())


def test_every_family_a_rule_reads_is_in_the_table() -> None:
    rules = load_rules()
    read = {families.family(name) for rule in rules for name in rule.requires if not name.startswith("derived.")}
    read |= {rule.for_each for rule in rules if rule.for_each}
    assert sorted(read - set(FAMILIES)) == []


@pytest.mark.parametrize(
    ("name", "probe", "words"),
    [
        ("gpu[0].name", "gpu", "the GPUs"),
        ("derived.gpu[0].sm", None, "the GPUs"),
        ("smoke[1].bf16_tflops", "smoke", "the GPU smoke run"),
        ("image[0].ref", "docker", "the Docker images"),
        ("derived.driver_cuda_support", None, "the NVIDIA driver"),
        ("somethingelse.x", None, "what this check needs"),
    ],
)
def test_a_fact_names_its_probe_and_what_it_is_about(name: str, probe: str | None, words: str) -> None:
    assert (provider(name), about(name)) == (probe, words)
