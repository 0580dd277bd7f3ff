"""docs/kubernetes/: validated against Kubernetes' own object schemas and node-problem-detector's
plugin configuration, and the plugin's command run the way node-problem-detector runs it."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from cuda_doctor.report.check.oneline import LIMIT

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "kubernetes"
FIXTURES = REPO / "tests" / "fixtures" / "kubernetes"
NPD_CONFIG = DOCS / "npd-cuda-doctor.json"
MANIFESTS = sorted(DOCS.glob("*.yaml"))


def k8s_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    bundle = json.loads((FIXTURES / "kubernetes-v1.33.0-strict.json").read_text(encoding="utf-8"))
    name = f"{api_version}/{kind}"
    assert name in bundle["$defs"], f"no schema for {name} in the vendored bundle (see its README)"
    pointer = name.replace("~", "~0").replace("/", "~1")  # a JSON pointer's escapes (RFC 6901)
    schema = {"$schema": bundle["$schema"], "$defs": bundle["$defs"], "$ref": f"#/$defs/{pointer}"}
    return jsonschema.Draft202012Validator(schema)


def npd_validator() -> jsonschema.protocols.Validator:
    schema = json.loads((FIXTURES / "npd-custom-plugin-monitor.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(validator: jsonschema.protocols.Validator, instance: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(instance)]


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


_DURATION = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def seconds(duration: str) -> float:
    """A Go duration string (already checked by the schema's pattern) in seconds."""
    return sum(float(n) * _UNIT[u] for n, u in _DURATION.findall(duration))


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifests_are_valid_kubernetes_objects(path: Path) -> None:
    docs = documents(path)
    assert docs
    for doc in docs:
        problems = errors(k8s_validator(doc["apiVersion"], doc["kind"]), doc)
        assert not problems, f"{path.name}: {doc['kind']}: {problems}"


def test_the_kubernetes_schema_refuses_what_the_api_server_would() -> None:
    daemonset = next(d for d in documents(DOCS / "cuda-doctor-daemonset.yaml") if d["kind"] == "DaemonSet")
    validator = k8s_validator("apps/v1", "DaemonSet")
    misspelled = copy.deepcopy(daemonset)
    misspelled["spec"]["template"]["spec"]["nodeSelecter"] = misspelled["spec"]["template"]["spec"].pop("nodeSelector")
    assert any("nodeSelecter" in e for e in errors(validator, misspelled))
    no_image_list = copy.deepcopy(daemonset)
    no_image_list["spec"]["template"]["spec"]["containers"] = {"name": "check"}
    assert errors(validator, no_image_list)
    wrong_version = {**daemonset, "apiVersion": "extensions/v1beta1"}
    assert errors(validator, wrong_version)


def test_the_plugin_config_is_what_node_problem_detector_accepts() -> None:
    config = json.loads(NPD_CONFIG.read_text(encoding="utf-8"))
    assert not errors(npd_validator(), config)
    # what config.go's Validate() checks across fields
    plugin = config["pluginConfig"]
    conditions = {c["type"] for c in config["conditions"]}
    for rule in config["rules"]:
        assert seconds(rule["timeout"]) <= seconds(plugin["timeout"])
        if rule["type"] == "permanent":
            assert rule["condition"] in conditions
        assert os.path.isabs(rule["path"])
    assert seconds(plugin["invoke_interval"]) > 0
    # and what cuda-doctor needs: the whole line kept, and time for the slowest fast check
    assert plugin["max_output_length"] >= LIMIT
    for rule in config["rules"]:
        call = float(rule["args"][rule["args"].index("--timeout") + 1])
        assert seconds(rule["timeout"]) > 3 * call + 5, "a probe may take 3 x --timeout + 5 s before it is abandoned"


def test_the_plugin_schema_refuses_what_node_problem_detector_would() -> None:
    config = json.loads(NPD_CONFIG.read_text(encoding="utf-8"))
    validator = npd_validator()
    for change in (
        lambda c: c.update(plugin="script"),
        lambda c: c["pluginConfig"].update(invoke_interval="5 minutes"),
        lambda c: c["rules"][0].update(timeout="-1s"),
        lambda c: c["rules"][0].pop("condition"),
        lambda c: c["rules"][0].update(type="sticky"),
        lambda c: c.pop("source"),
        lambda c: c["pluginConfig"].update(max_output_lenght=200),
    ):
        changed = copy.deepcopy(config)
        change(changed)
        assert errors(validator, changed), f"accepted: {changed}"


def test_the_configmap_holds_the_plugin_config_where_the_daemonset_reads_it() -> None:
    docs = {d["kind"]: d for d in documents(DOCS / "npd-cuda-doctor.yaml")}
    configmap, daemonset = docs["ConfigMap"], docs["DaemonSet"]
    (key, text), *_ = configmap["data"].items()
    assert json.loads(text) == json.loads(NPD_CONFIG.read_text(encoding="utf-8"))
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    flag = next(a for a in container["command"] if a.startswith("--config.custom-plugin-monitor="))
    config_path = Path(flag.partition("=")[2])
    volume = next(v for v in pod["volumes"] if v.get("configMap", {}).get("name") == configmap["metadata"]["name"])
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
    item = next(i for i in volume["configMap"]["items"] if i["key"] == key)
    assert config_path == Path(mount["mountPath"]) / item["path"]
    assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]
    binding = docs["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == "system:node-problem-detector"
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]


def npd_run(argv: list[str], env: dict[str, str], max_output_length: int) -> tuple[str, str, bytes]:
    """Run a plugin as node-problem-detector does: its exit status read as OK (0), NonOK (1)
    or Unknown (anything else); its stdout trimmed, then cut at max_output_length bytes."""
    proc = subprocess.run(argv, capture_output=True, env=env, timeout=120, check=False)
    status = {0: "OK", 1: "NonOK"}.get(proc.returncode, "Unknown")
    return status, proc.stdout.strip()[:max_output_length].decode("utf-8"), proc.stdout


@pytest.mark.parametrize(
    ("mode", "status", "start"),
    [
        ("ok", "OK", "OK driver 580.159.04 (CUDA 13.0), 1x NVIDIA H200"),
        ("not_loaded", "NonOK", "FAIL CD101 the NVIDIA kernel driver is not loaded"),
        ("mismatch", "NonOK", "FAIL CD101 Driver/library version mismatch"),
    ],
)
def test_the_plugin_command_speaks_node_problem_detectors_contract(
    fake_nvidia_smi: Any, mode: str, status: str, start: str
) -> None:
    config = json.loads(NPD_CONFIG.read_text(encoding="utf-8"))
    (rule,) = config["rules"]
    # the rule's own arguments; this checkout's cuda-doctor in place of the image's
    argv = [sys.executable, "-m", "cuda_doctor", *rule["args"]]
    env = {
        **fake_nvidia_smi.ctx(mode).env,
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "PYTHONPATH": str(REPO),
        "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
    }
    got, message, stdout = npd_run(argv, env, config["pluginConfig"]["max_output_length"])
    assert (got, message[: len(start)]) == (status, start)
    assert stdout == message.encode() + b"\n", "the whole line, and only it, is the condition's message"
