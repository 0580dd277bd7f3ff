"""Fuzzing what cuda-doctor reads from outside: saved reports, rule files, configuration TOML and
nvidia-smi's XML.  Whatever comes in, the answer is a value or cuda-doctor's own error naming the
file, never a traceback; each example is bounded in time by hypothesis' deadline."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda_doctor.base.errors import UserError
from cuda_doctor.core.config import load_config
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.reportfile import load_report
from cuda_doctor.core.rules import RuleFileError, judge_rule, load_rule_file
from cuda_doctor.gpu.nvidia_smi import parse_query_xml

SETTINGS = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=30,
)
KEYS = ["schema", "schema_version", "facts", "values", "unknown", "results", "host", "created", "summary"]


def answered(call: Callable[[], object]) -> object:
    """What ``call`` returns, or the error it raised for the user, which must name the problem."""
    try:
        return call()
    except UserError as exc:
        assert exc.format_message().strip()
        return exc


def written(name: str, data: bytes) -> Path:
    folder = Path(tempfile.mkdtemp())
    path = folder / name
    path.write_bytes(data)
    return path


@SETTINGS
@given(
    document=st.dictionaries(st.sampled_from(KEYS), JSON, max_size=6)
    | st.builds(lambda v: {"facts": {"values": v, "unknown": {}}}, st.dictionaries(st.text(max_size=10), JSON)),
)
def test_any_json_as_a_saved_report(document: dict[str, Any]) -> None:
    path = written("report.json", json.dumps(document).encode())
    answered(lambda: load_report(path))


@SETTINGS
@given(data=st.binary(max_size=300))
def test_any_bytes_as_a_saved_report(data: bytes) -> None:
    answered(lambda: load_report(written("report.json", data)))


RULE_FIELDS = [
    "id",
    "title",
    "category",
    "severity",
    "requires",
    "rationale",
    "links",
    "outcome",
    "for_each",
    "applies",
]
TOML_VALUE = st.one_of(
    st.text(max_size=15).map(json.dumps),
    st.integers().map(str),
    st.lists(st.text(max_size=8).map(json.dumps), max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
    st.sampled_from(['{ fact = "gpu.count", gt = 0 }', '{ fact = "x", matches = "(a+)+$" }', '"CD999"', "true"]),
)


@SETTINGS
@given(fields=st.dictionaries(st.sampled_from(RULE_FIELDS), TOML_VALUE, max_size=10), tail=st.text(max_size=40))
def test_any_rule_file(fields: dict[str, str], tail: str) -> None:
    text = "".join(f"{key} = {value}\n" for key, value in fields.items()) + tail
    try:
        rule = load_rule_file(written("CD999.toml", text.encode("utf-8", "surrogatepass")))
    except RuleFileError:
        return
    judge_rule(rule, Facts({"gpu.count": 1, "x": "a" * 50 + "!"}, {}))


@SETTINGS
@given(body=st.text(max_size=200), section=st.booleans())
def test_any_configuration(body: str, section: bool) -> None:
    text = ("[tool.cuda-doctor]\n" if section else "") + body
    path = written("pyproject.toml", text.encode("utf-8", "surrogatepass"))
    answered(lambda: load_config(path, path.parent))


XML_PARTS = st.sampled_from(
    [
        "<nvidia_smi_log>", "</nvidia_smi_log>", "<gpu id='00000000:06:00.0'>", "</gpu>",
        "<driver_version>580.1</driver_version>",
        "<fb_memory_usage><total>143771 MiB</total></fb_memory_usage>", "<total>" + "9" * 5000 + "</total>",
        "<product_name>H200</product_name>", "<!DOCTYPE x [<!ENTITY a 'aaaa'>]>", "&a;", "<ecc_errors>", "garbage",
    ]
)  # fmt: skip


@SETTINGS
@given(parts=st.lists(XML_PARTS, max_size=15), noise=st.text(max_size=30))
def test_any_nvidia_smi_xml(parts: list[str], noise: str) -> None:
    facts = parse_query_xml("".join(parts) + noise)
    assert facts.has("driver.status") or facts.reason("driver.status") or facts.has("driver.version")
