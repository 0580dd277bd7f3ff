"""Knowledge-table helpers: the CUDA ↔ driver table, what CUDA_VISIBLE_DEVICES exposes, and the pip
that fixes run."""

from __future__ import annotations

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.fixes import pip_of
from cuda_doctor.framework.libraries.common import pip_install
from cuda_doctor.tables.driver import cuda_supported_by_driver, min_driver_for_cuda


@pytest.mark.parametrize(
    ("cuda", "driver"),
    [("13.0", "580.65.06"), ("12.4", "550.54.14"), ("11.8", "520.61.05"), ("9.9", None), ("x", None)],
)
def test_min_driver_for_cuda_is_the_ga_release_floor(cuda: str, driver: str | None) -> None:
    assert min_driver_for_cuda(cuda) == driver


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("580.159.04", "13.0"),
        ("535.104.05", "12.2"),
        ("470.82.01", "11.4"),
        ("390.1", None),  # older than every release in the table
        ("abc", None),
    ],
)
def test_cuda_supported_by_driver(driver: str, cuda: str | None) -> None:
    assert cuda_supported_by_driver(driver) == cuda


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, ("unset", None, None)),
        (" ", ("empty", 0, None)),
        ("1,0", ("ok", 2, None)),
        ("0,2,-1,1", ("invalid", 1, "'2' names no GPU on this machine")),
        ("7", ("hides_all", 0, "'7' names no GPU on this machine")),
        ("0,0", ("duplicate", 0, "'0' is listed twice")),
        ("GPU-3d95cf99", ("ok", 1, None)),  # a UUID prefix naming one GPU
        ("GPU-ffff", ("hides_all", 0, "'GPU-ffff' names no GPU on this machine")),
    ],
)
def test_visible_devices(raw: str | None, expected: tuple[object, ...]) -> None:
    from cuda_doctor.gpu.visible_devices import visible_devices

    assert tuple(visible_devices(raw, 2, ["GPU-3d95cf99-d22a", "GPU-a3493707-0000"])) == expected


@pytest.mark.parametrize(
    ("values", "pip"),
    [
        ({"framework.pip": "pip", "framework.python": "/usr/bin/python3"}, "pip"),  # plain pip is that interpreter's
        ({"framework.python": "/opt/my env/bin/python"}, "'/opt/my env/bin/python' -m pip"),
        ({"jax.python": "/opt/jax/bin/python"}, "/opt/jax/bin/python -m pip"),  # a JAX-only interpreter
        ({}, "python3 -m pip"),  # none probed: the command every Linux Python has
    ],
)
def test_every_fix_runs_the_same_pip(values: dict[str, str], pip: str) -> None:
    facts = Facts(dict(values))
    assert pip_of(facts) == pip
    assert pip_install(facts, "torch==2.5.*", options="--user") == f"{pip} install --user 'torch==2.5.*'"
