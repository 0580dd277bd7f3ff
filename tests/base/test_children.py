"""Children of the target interpreter: the record protocol, start timeout, deadline, caps, groups."""

from __future__ import annotations

import ast
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_doctor.base import children
from tests.conftest import gone, wait_for_file, wait_until

ENV = {"PATH": os.defpath, "LANG": "C.UTF-8"}


def source(body: str) -> str:
    return "import json, os, sys, time\n" + textwrap.dedent(body)


# -- the protocol ----------------------------------------------------------------------------------
def test_records_are_json_object_lines_and_nothing_else() -> None:
    text = '{"started": true}\nNCCL INFO chatter\n[1, 2]\n{broken\n  {"step": "a"}  \n{"result": {"ok": 1}}'
    assert children.parse_records(text) == [{"started": True}, {"step": "a"}, {"result": {"ok": 1}}]
    assert children.parse_record(b'{"step": "x"}') == {"step": "x"}
    assert children.parse_record('{"result": {"status": "o') is None  # cut off mid-write


def test_progress_records_are_told_apart_from_answers() -> None:
    assert children.is_progress({"started": True, "rank": 0})
    assert children.is_progress({"step": "import torch"})
    assert not children.is_progress({"values": {}, "unknown": {}})


def test_quoted_output_is_capped() -> None:
    assert children.excerpt("  short  ") == "short"
    long = "x" * 5000
    assert children.excerpt(long, 100) == "x" * 100 + "… (4900 more characters)"


def test_start_timeout_is_the_option_with_a_floor_within_the_limit() -> None:
    assert children.start_timeout(0.5, 60) == children.START_FLOOR
    assert children.start_timeout(20, 60) == 20
    assert children.start_timeout(20, 1) == 1


# -- one child ---------------------------------------------------------------------------------------
def test_steps_reach_the_callback_as_they_come_and_the_result_keeps_the_records() -> None:
    seen: list[str] = []
    code = source("""
        for record in ({"started": True}, {"step": "one"}, {"step": "two"}, {"answer": 42}):
            print(json.dumps(record), flush=True)
        print("a library talking")
    """)
    result = children.run(sys.executable, code, env=ENV, timeout=60, on_step=seen.append)
    assert seen == ["one", "two"]
    assert result.returncode == 0 and not result.timed_out and not result.cut
    assert children.parse_records(result.stdout)[-1] == {"answer": 42}
    assert "a library talking" in result.stdout


def test_arguments_follow_the_source_and_it_runs_with_dash_c(tmp_path: Path) -> None:
    # Run by path, the script's folder would come first on sys.path: this json.py would win.
    (tmp_path / "json.py").write_text("raise ImportError('the folder of the script is on sys.path')\n")
    script = tmp_path / "child.py"
    script.write_text("import json, sys\nprint(json.dumps({'argv': sys.argv}))\n")
    result = children.run(sys.executable, script.read_text(), ["a b", "{}"], env=ENV, timeout=60)
    assert result.returncode == 0, result.stderr
    assert children.parse_records(result.stdout) == [{"argv": ["-c", "a b", "{}"]}]


def test_interpreter_that_never_starts_is_given_up_on_at_the_start_timeout(tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\necho $$ > {tmp_path / 'pid'}\nexec sleep 600\n")
    python.chmod(0o755)
    child = children.Child(str(python), "pass", env=ENV, timeout=600, start_timeout=0.5)
    pid = int(wait_for_file(tmp_path / "pid"))
    assert child.wait_for(lambda record: True) is None
    result = child.finish()
    assert result.timed_out and not child.started
    assert result.stdout == "" and wait_until(lambda: gone(pid))


def test_deadline_kills_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    code = source(f"""
        import subprocess
        print(json.dumps({{"started": True}}), flush=True)
        helper = subprocess.Popen(["sleep", "600"])
        with open({str(pids)!r}, "w") as out:
            out.write(f"{{os.getpid()}} {{helper.pid}}\\n")
        print(json.dumps({{"step": "waiting"}}), flush=True)
        time.sleep(600)
    """)
    child = children.Child(sys.executable, code, env=ENV, timeout=3)
    own, helper = (int(p) for p in wait_for_file(pids).split())
    result = child.finish()
    assert result.timed_out and result.returncode == -9
    assert children.parse_records(result.stdout)[-1] == {"step": "waiting"}
    assert wait_until(lambda: gone(own) and gone(helper))  # SIGKILL takes a moment to land


def test_a_flood_is_cut_at_the_caps_and_said_so() -> None:
    code = source("""
        print(json.dumps({"started": True}), flush=True)
        chunk = "y" * (1 << 16) + "\\n"
        for _ in range(160):  # 10 MiB on each stream
            sys.stdout.write(chunk)
            sys.stderr.write(chunk)
        sys.stderr.write("the last line\\n")
    """)
    result = children.run(sys.executable, code, env=ENV, timeout=120)
    assert result.cut
    assert len(result.stdout) <= children.STDOUT_CAP
    assert len(result.stderr) <= children.STDERR_TAIL and result.stderr.endswith("the last line\n")
    assert children.parse_records(result.stdout) == [{"started": True}]
    assert "its output passed 1 MiB; the rest was not read" in children.cut_note(result)


def test_one_endless_line_is_cut_too() -> None:
    code = source("""
        while True:
            sys.stdout.write("z" * 65536)
    """)
    result = children.run(sys.executable, code, env=ENV, timeout=3, start_timeout=3)
    assert result.cut and len(result.stdout) <= children.STDOUT_CAP


def test_a_missing_interpreter_is_a_result_not_an_exception(tmp_path: Path) -> None:
    child = children.Child(str(tmp_path / "no-python"), "pass", env=ENV, timeout=5)
    assert child.result is not None and child.result.returncode is None
    assert child.result.error == "No such file or directory"
    assert child.finish() is child.result and not child.send({"x": 1})


def test_send_writes_one_line_the_child_reads() -> None:
    code = source("""
        print(json.dumps({"started": True}), flush=True)
        order = json.loads(sys.stdin.readline())
        print(json.dumps({"echo": order}), flush=True)
        print(json.dumps({"after": sys.stdin.read()}), flush=True)
    """)
    child = children.Child(sys.executable, code, env=ENV, timeout=60, stdin=True)
    assert child.wait_for(lambda record: "started" in record) == {"started": True}
    assert child.send({"run": "x", "argv": [1]})
    assert child.wait_for(lambda record: "echo" in record) == {"echo": {"run": "x", "argv": [1]}}
    result = child.finish()  # closes stdin: the child reads its end
    assert children.parse_records(result.stdout)[-1] == {"after": ""}
    assert not child.send({"too": "late"})


def test_seen_answers_from_the_records_so_far_without_waiting() -> None:
    code = source("""
        print(json.dumps({"started": True}), flush=True)
        print(json.dumps({"first": 1}), flush=True)
        sys.stdin.readline()
        print(json.dumps({"second": 2}), flush=True)
    """)
    child = children.Child(sys.executable, code, env=ENV, timeout=60, stdin=True)
    assert child.wait_for(lambda record: "first" in record) == {"first": 1}
    assert child.seen(lambda record: "second" in record) is None  # not printed yet: no wait for it
    assert child.seen(lambda record: "first" in record or "started" in record) == {"started": True}
    child.send({})
    assert child.wait_for(lambda record: "second" in record) == {"second": 2}
    assert child.seen(lambda record: "second" in record) == {"second": 2}
    child.finish()


def test_more_time_for_a_child_taken_over() -> None:
    code = source("""
        print(json.dumps({"started": True}), flush=True)
        sys.stdin.readline()
        time.sleep(1)
        print(json.dumps({"done": True}), flush=True)
    """)
    child = children.Child(sys.executable, code, env=ENV, timeout=0.5, stdin=True)
    assert child.wait_for(lambda record: True) == {"started": True}
    child.give_more_time(60)
    child.send({})
    result = child.finish()
    assert not result.timed_out and children.parse_records(result.stdout)[-1] == {"done": True}
    assert child.limit == 60


# -- groups ------------------------------------------------------------------------------------------
def _member(body: str) -> tuple[list[str], dict[str, str]]:
    return [body], ENV


GROUP_SOURCE = source("""
    print(json.dumps({"started": True}), flush=True)
    exec(sys.argv[1])
""")


def test_the_first_failing_member_stops_the_group() -> None:
    members = [_member("time.sleep(600)"), _member("sys.exit(3)"), _member("time.sleep(600)")]
    group = children.run_group(sys.executable, GROUP_SOURCE, members, timeout=120)
    assert group.failed == 1 and not group.timed_out
    assert [r.returncode for r in group.results] == [-9, 3, -9]


def test_the_deadline_stops_every_member() -> None:
    group = children.run_group(sys.executable, GROUP_SOURCE, [_member("time.sleep(600)")] * 2, timeout=1)
    assert group.timed_out and group.failed is None
    assert all(r.timed_out for r in group.results)


def test_a_group_that_succeeds_keeps_each_members_output() -> None:
    members = [_member(f"print(json.dumps({{'rank': {i}}}))") for i in range(3)]
    group = children.run_group(sys.executable, GROUP_SOURCE, members, timeout=120)
    assert group.failed is None and not group.timed_out
    assert [children.parse_records(r.stdout)[-1] for r in group.results] == [{"rank": 0}, {"rank": 1}, {"rank": 2}]


def test_a_member_that_cannot_start_stops_those_already_started(tmp_path: Path) -> None:
    group = children.run_group(str(tmp_path / "none"), "pass", [_member("")] * 2, timeout=60)
    assert group.failed == 0 and len(group.results) == 1
    assert group.results[0].error == "No such file or directory"


@pytest.mark.parametrize("mode", ["tail", "head"])
def test_kept_bytes_never_pass_the_cap(mode: str, tmp_path: Path) -> None:
    from cuda_doctor.base.process import Pipe

    data = tmp_path / "data"
    data.write_bytes(b"".join(json.dumps({"n": i}).encode() + b"\n" for i in range(20000)))
    lines: list[bytes] = []
    with data.open("rb") as stream:
        pipe = Pipe(stream, 4096, keep=mode, on_line=lines.append)  # type: ignore[arg-type]
        pipe.join(timeout=30)
    assert pipe.cut and len(pipe.text()) <= 4096
    if mode == "head":
        assert pipe.text().startswith('{"n": 0}\n') and lines[0] == b'{"n": 0}'
        assert len(lines) < 1000  # only the lines within the cap
    else:
        assert pipe.text().endswith('{"n": 19999}\n')


def test_waiting_on_a_child_that_could_not_start_returns_at_once(tmp_path: Path) -> None:
    child = children.Child(str(tmp_path / "no-python"), "pass", env=ENV, timeout=600, start_timeout=600)
    assert child.wait_for(lambda record: True) is None  # not after the start timeout: now


# -- composing a child's source with child-side modules -------------------------------------------
def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_compose_puts_each_named_helper_once_before_the_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helpers = tmp_path / "childside"
    helpers.mkdir()
    _write(helpers, "base.py", "from __future__ import annotations\nBASE = 2\n")
    _write(
        helpers,
        "twice.py",
        "from cuda_doctor.base.childside.base import BASE\ndef twice() -> int:\n    return BASE * 2\n",
    )
    script = _write(
        tmp_path,
        "child.py",
        """\
        from __future__ import annotations
        import json
        from cuda_doctor.base.childside.base import BASE
        from cuda_doctor.base.childside.twice import (
            twice,
        )
        print(json.dumps({"started": True}))
        print(json.dumps({"answer": BASE + twice()}))
        """,
    )
    monkeypatch.setattr(children, "CHILDSIDE", helpers)
    children.compose.cache_clear()
    composed = children.compose(script)
    assert composed.startswith("from __future__ import annotations\n")
    assert composed.count("from __future__") == 1  # hoisted: it may only stand first
    assert "cuda_doctor" not in composed.replace("# ----", "")  # no import of ours is left
    assert composed.index("BASE = 2") < composed.index("def twice") < composed.index('"answer"')
    result = children.run(sys.executable, composed, env=ENV, timeout=30)
    assert children.parse_records(result.stdout)[-1] == {"answer": 6}
    children.compose.cache_clear()


def test_the_framework_child_composes_into_one_self_contained_source() -> None:
    from cuda_doctor.framework.probe import CHILD_SCRIPT

    composed = children.compose(CHILD_SCRIPT)
    tree = ast.parse(composed, feature_version=(3, 8))
    names: list[str] = []
    for node in tree.body:  # one namespace in the child: no helper may redefine another's name
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    assert "from cuda_doctor" not in composed
