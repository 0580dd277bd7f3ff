"""Rules as data: loading and validating rule files, the operator table, and evaluation.

A rule file is TOML (format: docs/rule-format.md).  Conditions use a closed table of named
operators with three-valued logic (true / false / unknown); nothing is ever ``eval``-ed.
Judging turns each rule (per subject, for ``for_each`` rules) into a ``Result``; a rule that
breaks becomes a result with status ``error``, never a traceback.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from cuda_doctor.base import tomlcache
from cuda_doctor.base.errors import UserError
from cuda_doctor.base.paths import rules_dir
from cuda_doctor.core.detectors import DETECTORS
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.families import FAMILIES
from cuda_doctor.core.results import Result, Severity, Status
from cuda_doctor.core.selection import left_out

if TYPE_CHECKING:
    from packaging.version import Version

RULE_KINDS = ("env", "lint")
#: How long judging every rule may take, at most (a repository may add rules).
JUDGING_SECONDS = 30.0
#: The most of a fact's text a ``matches`` condition reads.
MATCHED_TEXT = 1 << 20
_ID = re.compile(r"^[A-Z][A-Z0-9]*\d{3}$")


class RuleFileError(UserError):
    """A rule file that cannot be used; the message names the file and the field."""


# -- three-valued logic -------------------------------------------------------------------------


class _Unknown(NamedTuple):
    """The third truth value; carries the name of the fact that was missing."""

    fact: str


def _ver(value: Any) -> Version:
    from packaging.version import Version  # only rules that compare versions pay for it

    return Version(str(value).strip())


def _num(value: Any) -> float:
    if isinstance(value, bool):
        raise TypeError("expected a number, got a boolean")
    return float(value)


def _operand(ok: Callable[[Any], bool], problem: str) -> Callable[[Any], str | None]:
    """The check of an operand that is fine when ``ok(operand)``, else ``problem``."""
    return lambda operand: None if ok(operand) else problem


_no_check = _operand(lambda x: True, "")
_a_bool = _operand(lambda x: isinstance(x, bool), "must be true or false")
_a_list = _operand(lambda x: isinstance(x, list), "must be a list of values")
_a_scalar = _operand(
    lambda x: isinstance(x, (str, int, float)) and not isinstance(x, bool), "must be a string or a number"
)
_a_number = _operand(lambda x: isinstance(x, (int, float)) and not isinstance(x, bool), "must be a number")
_a_length = _operand(
    lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 0, "must be a whole number, 0 or more"
)


@functools.lru_cache(maxsize=256)
def linear_regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2, which matches in time linear in the text: a rule from a
    repository cannot make judging backtrack for minutes.  Without google-re2 installed (a
    source checkout run from PYTHONPATH), Python's ``re``: the shipped rules' patterns are ours,
    and ``load_rule_file`` refuses a repository's rule that matches patterns."""
    try:
        import re2  # google-re2; only rules that match patterns pay for its import
    except ImportError:
        return re.compile(pattern)
    return re2.compile(pattern)


@functools.cache
def has_re2() -> bool:
    try:
        import re2  # noqa: F401
    except ImportError:
        return False
    return True


def _matches(value: Any, pattern: Any) -> bool:
    return value is not None and linear_regex(str(pattern)).search(str(value)[:MATCHED_TEXT]) is not None


def _a_regex(operand: Any) -> str | None:
    if not isinstance(operand, str):
        return "must be a regular expression (a string)"
    try:
        linear_regex(operand)
    except Exception as exc:  # re2.error; RE2 has no backreferences nor lookaround
        return f"is not a valid regular expression for RE2, which has no backreferences nor lookaround ({exc})"
    return None


def _a_version(operand: Any) -> str | None:
    # a string: TOML reads 12.10 as the number 12.1
    if not isinstance(operand, str):
        return 'must be a version string such as "12.4"'
    from packaging.version import InvalidVersion  # only rules that compare versions pay for it

    try:
        _ver(operand)
    except InvalidVersion:
        return 'is not a version such as "12.4" or "2.5.1"'
    return None


class Operator(NamedTuple):
    """One operator: its test, (fact value, operand) → bool, and the check of its operand at load
    time, operand → what is wrong with it (None when it is fine)."""

    test: Callable[[Any, Any], bool]
    check: Callable[[Any], str | None]


#: The closed operator table.
OPERATORS: dict[str, Operator] = {
    "equals": Operator(lambda v, x: bool(v == x), _no_check),
    "not_equals": Operator(lambda v, x: bool(v != x), _no_check),
    "is_null": Operator(lambda v, x: (v is None) == bool(x), _a_bool),
    "truthy": Operator(lambda v, x: bool(v) == bool(x), _a_bool),
    "in": Operator(lambda v, x: v in x, _a_list),
    "not_in": Operator(lambda v, x: v not in x, _a_list),
    "contains": Operator(lambda v, x: v is not None and x in v, _a_scalar),
    "matches": Operator(_matches, _a_regex),
    "gt": Operator(lambda v, x: v is not None and _num(v) > _num(x), _a_number),
    "gte": Operator(lambda v, x: v is not None and _num(v) >= _num(x), _a_number),
    "lt": Operator(lambda v, x: v is not None and _num(v) < _num(x), _a_number),
    "lte": Operator(lambda v, x: v is not None and _num(v) <= _num(x), _a_number),
    "version_gte": Operator(lambda v, x: v is not None and _ver(v) >= _ver(x), _a_version),
    "version_lt": Operator(lambda v, x: v is not None and _ver(v) < _ver(x), _a_version),
    "version_eq": Operator(lambda v, x: v is not None and _ver(v) == _ver(x), _a_version),
    "len_gte": Operator(lambda v, x: v is not None and len(v) >= int(x), _a_length),
    "len_lt": Operator(lambda v, x: v is not None and len(v) < int(x), _a_length),
    "exists": Operator(lambda v, x: True, _a_bool),  # decided on whether the fact is known: see evaluate
}
COMBINATORS = ("all", "any", "not")


def validate_condition(cond: Any, where: str) -> None:
    """Raise RuleFileError naming ``where`` when ``cond`` is not a well-formed condition."""
    if not isinstance(cond, dict):
        raise RuleFileError(f"{where}: a condition must be a table, got {type(cond).__name__}")
    combos = [k for k in cond if k in COMBINATORS]
    if combos:
        if len(cond) != 1:
            raise RuleFileError(f"{where}: '{combos[0]}' must stand alone in its table")
        key = combos[0]
        body = cond[key]
        if key == "not":
            validate_condition(body, f"{where}.not")
            return
        if not isinstance(body, list) or not body:
            raise RuleFileError(f"{where}.{key}: expected a non-empty list of conditions")
        for n, sub in enumerate(body):
            validate_condition(sub, f"{where}.{key}[{n}]")
        return
    if "fact" not in cond or not isinstance(cond["fact"], str):
        raise RuleFileError(f"{where}: a leaf condition needs 'fact' (a fact name)")
    ops = [k for k in cond if k != "fact"]
    if len(ops) != 1:
        raise RuleFileError(f"{where}: a leaf needs exactly one operator, got {ops or 'none'}")
    _validate_operand(ops[0], cond[ops[0]], where)


def _validate_operand(op: str, operand: Any, where: str) -> None:
    """An operand the operator cannot use would make the condition silently false on every run."""
    operator = OPERATORS.get(op)
    if operator is None:
        raise RuleFileError(f"{where}: unknown operator '{op}' (known: {', '.join(OPERATORS)})")
    if isinstance(operand, dict) and op != "exists":  # the value of another fact
        if set(operand) != {"fact"} or not isinstance(operand["fact"], str):
            raise RuleFileError(f"{where}: field '{op}': a table operand must be {{ fact = \"NAME\" }}")
        return
    problem = operator.check(operand)
    if problem is not None:
        raise RuleFileError(f"{where}: field '{op}' {problem}, got {operand!r}")


def evaluate(cond: Mapping[str, Any], facts: Facts, bind: Callable[[str], str]) -> bool | _Unknown:
    """Evaluate a validated condition.  ``bind`` maps rule-local names to fact names."""
    for key, decisive in (("all", False), ("any", True)):  # one false decides all, one true any
        if key in cond:
            unknown: _Unknown | None = None
            for sub in cond[key]:
                value = evaluate(sub, facts, bind)
                if value is decisive:
                    return decisive
                if isinstance(value, _Unknown):
                    unknown = unknown or value
            return unknown if unknown else not decisive
    if "not" in cond:
        value = evaluate(cond["not"], facts, bind)
        return value if isinstance(value, _Unknown) else not value
    name = bind(cond["fact"])
    op = next(k for k in cond if k != "fact")
    operand = cond[op]
    if op == "exists":
        return facts.has(name) == bool(operand)
    if not facts.has(name):
        return _Unknown(name)
    if isinstance(operand, dict) and set(operand) == {"fact"}:
        other = bind(str(operand["fact"]))
        if not facts.has(other):
            return _Unknown(other)
        operand = facts.get(other)
    try:
        return bool(OPERATORS[op].test(facts.get(name), operand))
    except (TypeError, ValueError, re.error):  # packaging's InvalidVersion is a ValueError
        return False  # a value of the wrong shape does not satisfy the comparison


# -- rules ----------------------------------------------------------------------------------------


class RuleOutcome(NamedTuple):
    """One ``[[outcome]]`` of an environment rule: when ``when`` holds, the result it gives."""

    when: dict[str, Any]
    severity: Severity | None  # None → the rule's severity
    status: Status | None  # an explicit "pass" outcome
    message: str
    fix: str | None
    commands: tuple[str, ...]
    explains: tuple[str, ...] | None = None  # None → the rule's ``explains``


class Rule(NamedTuple):
    id: str
    title: str
    category: str
    severity: Severity
    rationale: str
    links: tuple[str, ...]
    path: Path
    kind: str = "env"
    for_each: str | None = None
    requires: tuple[str, ...] = ()
    applies: dict[str, Any] | None = None
    skip_message: str = "not applicable here"
    pass_message: str = ""
    outcomes: tuple[RuleOutcome, ...] = ()
    explains: tuple[str, ...] = ()  # rules whose failure, alongside a finding of this one, it explains
    detector: str | None = None  # lint rules
    message: str = ""  # lint rules
    fix: str | None = None  # lint rules
    opt_in: bool = False  # lint rules: off unless a selection names the rule by its id

    def origin(self) -> str | None:
        """The folder of a rule that does not ship with cuda-doctor (``rules-dirs``): its
        messages and fixes are the repository's words, not cuda-doctor's.  None: shipped."""
        shipped = rules_dir()
        return None if self.path.parent == shipped else str(self.path.parent)

    def severity_override(self, overrides: Mapping[str, str]) -> str | None:
        """The configured severity for this rule: its own id wins, then the longest id prefix,
        then its category (``severity = { CD5 = "off" }`` turns off the CD5xx rules)."""
        best: tuple[int, str] | None = None
        for pattern, level in overrides.items():
            if not self.matches(pattern):
                continue
            name = pattern.strip().upper()
            weight = 1000 if name == self.id else len(name) if self.id.startswith(name) else 0
            if best is None or weight > best[0]:
                best = (weight, level)
        return best[1] if best else None

    def matches(self, pattern: str) -> bool:
        """Whether a selection entry names this rule: its id, a prefix of it, or its category."""
        pattern = pattern.strip().upper()
        if not pattern:  # a prefix of every id: it must name nothing, not everything
            return False
        return self.id.startswith(pattern) or self.category.upper() == pattern


def _text(data: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = data.get(key)
    if value is None:
        if required:
            raise RuleFileError(f"{where}: missing required field '{key}'")
        return ""
    if not isinstance(value, str):
        raise RuleFileError(f"{where}: field '{key}' must be a string")
    return value


def _severity(value: Any, where: str) -> Severity:
    try:
        return Severity(value)
    except ValueError:
        choices = ", ".join(s.value for s in Severity)
        raise RuleFileError(f"{where}: severity must be one of {choices}, got {value!r}") from None


#: The fields a rule file may have.
_FIELDS = (
    {"id", "title", "category", "severity", "rationale", "links", "kind"}  # every rule
    | {"for_each", "requires", "applies", "skip_message", "pass_message", "outcome", "explains"}  # environment rules
    | {"detector", "message", "fix", "opt_in"}  # lint rules
)


def parse_rule(data: Mapping[str, Any], path: Path) -> Rule:
    where = str(path)
    rule_id = _text(data, "id", where)
    if not _ID.match(rule_id):
        raise RuleFileError(f"{where}: id {rule_id!r} must look like CD101 or CDL001")
    kind = data.get("kind", "env")
    if kind not in RULE_KINDS:
        raise RuleFileError(f"{where}: kind must be one of {', '.join(RULE_KINDS)}, got {kind!r}")
    category = _text(data, "category", where)
    links = data.get("links", [])
    if not isinstance(links, list) or not all(isinstance(x, str) for x in links):
        raise RuleFileError(f"{where}: 'links' must be a list of URLs")
    common = {
        "id": rule_id,
        "title": _text(data, "title", where),
        "category": category,
        "severity": _severity(data.get("severity", "error"), f"{where}: field 'severity'"),
        "rationale": _text(data, "rationale", where),
        "links": tuple(links),
        "path": path,
        "kind": kind,
    }
    unknown = sorted(set(data) - _FIELDS)
    if unknown:  # a misspelt field would otherwise be ignored without a word
        raise RuleFileError(f"{where}: unknown field {', '.join(repr(k) for k in unknown)}")
    if kind == "lint":
        return Rule(
            **common,
            detector=_detector(data, rule_id, where),
            message=_text(data, "message", where),
            fix=_text(data, "fix", where, required=False) or None,
            opt_in=_opt_in(data, where),
        )
    if "applies" in data:
        validate_condition(data["applies"], f"{where}: field 'applies'")
    requires = data.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(x, str) for x in requires):
        raise RuleFileError(f"{where}: 'requires' must be a list of fact names")
    raw_outcomes = data.get("outcome", [])
    if not isinstance(raw_outcomes, list) or not raw_outcomes:
        raise RuleFileError(f"{where}: an env rule needs at least one [[outcome]]")
    outcomes = []
    for n, raw in enumerate(raw_outcomes):
        at = f"{where}: outcome[{n}]"
        stray = sorted(set(raw) - {"when", "severity", "status", "message", "fix", "commands", "explains"})
        if stray:
            raise RuleFileError(f"{at}: unknown field {', '.join(repr(k) for k in stray)}")
        if "when" not in raw:
            raise RuleFileError(f"{at}: missing required field 'when'")
        validate_condition(raw["when"], f"{at}.when")
        status = raw.get("status")
        if status not in (None, "pass"):
            raise RuleFileError(f"{at}: status may only be 'pass' (use severity for findings)")
        commands = raw.get("commands", [])
        if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands):
            raise RuleFileError(f"{at}: 'commands' must be a list of strings")
        if status == "pass" and "explains" in raw:
            raise RuleFileError(f"{at}: field 'explains': a pass explains no failure")
        outcomes.append(
            RuleOutcome(
                when=raw["when"],
                severity=_severity(raw["severity"], f"{at}: field 'severity'") if "severity" in raw else None,
                status=Status.PASS if status == "pass" else None,
                message=_text(raw, "message", at),
                fix=_text(raw, "fix", at, required=False) or None,
                commands=tuple(commands),
                explains=_explains(raw, rule_id, at) if "explains" in raw else None,
            )
        )
    return Rule(
        **common,
        for_each=data.get("for_each"),
        requires=tuple(requires),
        applies=data.get("applies"),
        skip_message=str(data.get("skip_message", "not applicable here")),
        pass_message=_text(data, "pass_message", where, required=False) or "ok",
        outcomes=tuple(outcomes),
        explains=_explains(data, rule_id, where) if "explains" in data else (),
    )


def _explains(data: Mapping[str, Any], rule_id: str, where: str) -> tuple[str, ...]:
    """The ids an ``explains`` names: rule ids, not this rule's own (``load_rules`` checks that they exist)."""
    value = data["explains"]
    if not isinstance(value, list) or not all(isinstance(x, str) and _ID.match(x) for x in value):
        raise RuleFileError(f"{where}: field 'explains' must be a list of rule ids such as \"CD202\"")
    if rule_id in value:
        raise RuleFileError(f"{where}: field 'explains': a rule cannot explain itself")
    return tuple(value)


def check_explains(rules: Iterable[Rule]) -> None:
    """Every id an ``explains`` names is an environment rule, and no rule explains, through others,
    its own failure: a misspelt id would link nothing, and a loop would have no cause to show."""
    env = {rule.id: rule for rule in rules if rule.kind == "env"}
    edges = {rule_id: set(explained(rule)) for rule_id, rule in env.items()}
    for rule_id, named in edges.items():
        unknown = sorted(named - set(env))
        if unknown:
            raise RuleFileError(f"{env[rule_id].path}: field 'explains': no environment rule {', '.join(unknown)}")
    for start in sorted(edges):
        seen: set[str] = set()
        todo = list(edges[start])
        while todo:
            current = todo.pop()
            if current == start:
                raise RuleFileError(f"{env[start].path}: field 'explains': {start} explains, through others, itself")
            if current not in seen:
                seen.add(current)
                todo.extend(edges.get(current, ()))


def explained(rule: Rule) -> tuple[str, ...]:
    """Every rule that some finding of ``rule`` explains."""
    named = [*rule.explains, *(id_ for outcome in rule.outcomes for id_ in outcome.explains or ())]
    return tuple(dict.fromkeys(named))


def _opt_in(data: Mapping[str, Any], where: str) -> bool:
    value = data.get("opt_in", False)
    if not isinstance(value, bool):
        raise RuleFileError(f"{where}: field 'opt_in' must be true or false, got {value!r}")
    return value


def _detector(data: Mapping[str, Any], rule_id: str, where: str) -> str:
    """A lint rule's detector must exist and report this rule's id, or its findings would be lost."""
    name = _text(data, "detector", where)
    reports = DETECTORS.get(name)
    if reports is None:
        known = ", ".join(sorted(DETECTORS))
        raise RuleFileError(f"{where}: field 'detector': no detector named {name!r} (known: {known})")
    if reports != rule_id:
        raise RuleFileError(f"{where}: field 'detector': {name!r} reports {reports}, not {rule_id}")
    return name


def load_rule_file(path: Path) -> Rule:
    try:
        data = tomlcache.load(path)
    except ValueError as exc:  # tomllib.TOMLDecodeError
        raise RuleFileError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise RuleFileError(f"{path}: cannot read: {exc.strerror}") from None
    rule = parse_rule(data, path)
    if rule.origin() is not None and not has_re2() and "matches" in repr(rule.outcomes) + repr(rule.applies):
        needs = "needs google-re2 (pip install google-re2)"
        raise RuleFileError(f"{path}: a 'matches' condition in a rule that does not ship with cuda-doctor {needs}")
    return rule


def load_rules(extra_dirs: Iterable[Path] = (), *, builtin: bool = True) -> list[Rule]:
    """All rules, built-in first; a later rule with the same id is an error (ids are stable)."""
    dirs = ([rules_dir()] if builtin else []) + list(extra_dirs)
    rules: dict[str, Rule] = {}
    for directory in dirs:
        if not directory.is_dir():
            raise RuleFileError(f"{directory}: rules directory does not exist")
        try:  # os.listdir, not Path.glob: a tenth of the time for the same names, on every start
            names = os.listdir(directory)
        except OSError as exc:
            raise RuleFileError(f"{directory}: cannot list the rules directory: {exc.strerror}") from None
        for name in sorted(name for name in names if name.endswith(".toml")):  # names: Paths take twice as long to sort
            path = directory / name
            rule = load_rule_file(path)
            if rule.id in rules:
                raise RuleFileError(f"{path}: id {rule.id} is already used by {rules[rule.id].path}")
            rules[rule.id] = rule
    tomlcache.flush()
    check_explains(rules.values())
    return sorted(rules.values(), key=lambda r: r.id)


# -- rendering -------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.\[\]]*)\}")


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_show(v) for v in value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_show(v)}" for k, v in value.items()) or "none"
    return str(value)


def render_template(template: str, value: Callable[[str], str | None]) -> str:
    """Fill each ``{name}`` with ``value(name)``: a fact (environment rules) or what a detector
    captured (lint rules).  A name without a value renders "unknown", never a bare mark."""

    def sub(match: re.Match[str]) -> str:
        text = value(match.group(1))
        return "unknown" if text is None else text

    return _PLACEHOLDER.sub(sub, template)


def fact_values(facts: Facts, bind: Callable[[str], str]) -> Callable[[str], str]:
    """``render_template``'s values for a rule-local fact name, shown for people; an unknown
    fact says so, and why."""

    def value(name: str) -> str:
        name = bind(name)
        return _show(facts.get(name)) if facts.has(name) else f"unknown ({facts.unknown_reason(name)})"

    return value


def template_facts(templates: Iterable[str], bind: Callable[[str], str]) -> list[str]:
    return [bind(m.group(1)) for template in templates for m in _PLACEHOLDER.finditer(template)]


def condition_facts(cond: Mapping[str, Any], bind: Callable[[str], str]) -> list[str]:
    if "all" in cond or "any" in cond:
        key = "all" if "all" in cond else "any"
        return [n for sub in cond[key] for n in condition_facts(sub, bind)]
    if "not" in cond:
        return condition_facts(cond["not"], bind)
    names = [bind(cond["fact"])]
    operand = next(v for k, v in cond.items() if k != "fact")
    if isinstance(operand, dict) and "fact" in operand:
        names.append(bind(str(operand["fact"])))
    return names


# -- judging ----------------------------------------------------------------------------------------


class Judgement(NamedTuple):
    """How to judge: severity overrides from config (``off`` disables a rule)."""

    severity: Mapping[str, str] = MappingProxyType({})


def _binder(family: str | None, index: int | None) -> Callable[[str], str]:
    if family is None or index is None:
        return lambda name: name
    prefix = family + "."
    derived = f"derived.{family}."

    def bind(name: str) -> str:
        if name.startswith(prefix):
            return f"{family}[{index}].{name[len(prefix) :]}"
        if name.startswith(derived):
            return f"derived.{family}[{index}].{name[len(derived) :]}"
        return name

    return bind


#: A result, with the rules its finding explains (empty for a result that is no finding).
Judged = tuple[Result, tuple[str, ...]]


def judge_rule(rule: Rule, facts: Facts, judgement: Judgement | None = None) -> list[Result]:
    return [result for result, _ in _judge_rule(rule, facts, judgement or Judgement())]


def _judge_rule(rule: Rule, facts: Facts, judgement: Judgement) -> list[Judged]:
    if rule.kind != "env":
        return []
    if rule.for_each:
        indices = facts.indices(rule.for_each)
        label = _label(rule.for_each)
        if not indices:
            return [(_no_subject(rule, facts, label), ())]
        return [
            _judge_one(rule, facts, judgement, _binder(rule.for_each, i), _subject(facts, rule.for_each, label, i))
            for i in indices
        ]
    return [_judge_one(rule, facts, judgement, _binder(None, None), None)]


#: The fact that counts each family's subjects: known, an empty family means there are none.
FAMILY_COUNTS = {"gpu": "gpu.count", "image": "image.count", "smoke": "smoke.device_count"}
#: Families every check must know: when their count is unknown, so is every rule about them.
CORE_FAMILIES = frozenset({"gpu"})


def _label(family: str) -> str:
    """How a per-item result names its subject: smoke[1] and nvlink[1] are about "GPU 1"."""
    known = FAMILIES.get(family)
    return known.subject if known is not None and known.subject else family


def _no_subject(rule: Rule, facts: Facts, label: str) -> Result:
    """A ``for_each`` rule with nothing to judge: "no GPU found" only when the count is known;
    an unknown list of GPUs is unknown, never "not applicable"."""
    family = str(rule.for_each)
    count = FAMILY_COUNTS.get(family, f"{family}.count")
    if facts.has(count):
        return _result(rule, Status.SKIPPED, f"not applicable: no {label} found")
    if family in CORE_FAMILIES:
        return _unknown(rule, facts, count, None)
    why = facts.unknown_reason(count)
    return _result(rule, Status.SKIPPED, f"not applicable: {why}", evidence={count: f"unknown: {why}"})


def _subject(facts: Facts, family: str, label: str, index: int) -> str:
    """ "GPU 1"; images, distributions and libraries by their names, which say more than an index."""
    for name in FAMILIES[family].subject_names if family in FAMILIES else ():
        value = facts.get(f"{family}[{index}].{name}")
        if isinstance(value, str) and value:
            return value
    return f"{label} {index}"


def _result(
    rule: Rule,
    status: Status,
    message: str,
    subject: str | None = None,
    *,
    fix: str | None = None,
    commands: tuple[str, ...] = (),
    evidence: dict[str, Any] | None = None,
) -> Result:
    evidence = evidence or {}
    origin = rule.origin()
    return Result(
        rule.id, rule.title, rule.category, status, message, subject, fix, commands, rule.links, evidence, origin
    )


def _judge_one(
    rule: Rule, facts: Facts, judgement: Judgement, bind: Callable[[str], str], subject: str | None
) -> Judged:
    try:
        return _judge_unsafe(rule, facts, judgement, bind, subject)
    except Exception as exc:  # the rule itself broke: a result, never a traceback
        return _result(rule, Status.ERROR, f"rule failed: {type(exc).__name__}: {exc}", subject), ()


def _evidence(names: Iterable[str], facts: Facts) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        if facts.has(name):
            out[name] = facts.get(name)
        elif not name.startswith("derived."):
            out[name] = f"unknown: {facts.unknown_reason(name)}"
    return out


def _judge_unsafe(
    rule: Rule, facts: Facts, judgement: Judgement, bind: Callable[[str], str], subject: str | None
) -> Judged:
    override = rule.severity_override(judgement.severity)
    values = fact_values(facts, bind)
    if rule.applies is not None:
        applies = evaluate(rule.applies, facts, bind)
        if applies is False:
            return _skipped(rule, rule.applies, facts, bind, subject), ()
        if isinstance(applies, _Unknown):
            return _unknown(rule, facts, applies.fact, subject), ()
    for name in rule.requires:
        if not facts.has(bind(name)):
            return _unknown(rule, facts, bind(name), subject), ()
    for outcome in rule.outcomes:
        verdict = evaluate(outcome.when, facts, bind)
        if isinstance(verdict, _Unknown):
            return _unknown(rule, facts, verdict.fact, subject), ()
        if not verdict:
            continue
        names = condition_facts(outcome.when, bind)
        evidence = _evidence(names, facts)
        message = render_template(outcome.message, values)
        if outcome.status is Status.PASS:
            return _result(rule, Status.PASS, message, subject, evidence=evidence), ()
        severity = Severity(override) if override else (outcome.severity or rule.severity)
        fix = render_template(outcome.fix, values) if outcome.fix else None
        commands, missing = _commands(outcome.commands, facts, bind)
        if missing and fix is not None:  # say why a command is missing rather than print "?"
            fix = f"{fix} (no command: {missing})"
        result = _result(rule, severity.status, message, subject, fix=fix, commands=commands, evidence=evidence)
        return result, rule.explains if outcome.explains is None else outcome.explains
    names = [bind(n) for n in rule.requires] + template_facts([rule.pass_message], bind)
    passed = render_template(rule.pass_message, values)
    return _result(rule, Status.PASS, passed, subject, evidence=_evidence(names, facts)), ()


def _skipped(
    rule: Rule, applies: Mapping[str, Any], facts: Facts, bind: Callable[[str], str], subject: str | None
) -> Result:
    """A rule that does not apply.  The facts missing from its condition (``exists = true``) or
    its message are the evidence, which names the probe that did not run; a message that needs a
    missing fact gives way to the reason it is missing ("the driver was not tested: unknown")."""
    needed = template_facts([rule.skip_message], bind)
    missing = [n for n in [*condition_facts(applies, bind), *needed] if not facts.has(n)]
    gone = [n for n in needed if not facts.has(n)]
    if gone:
        message = f"not checked: {facts.unknown_reason(gone[0])}"
    else:
        message = render_template(rule.skip_message, fact_values(facts, bind))
    return _result(rule, Status.SKIPPED, message, subject, evidence=_evidence(dict.fromkeys(missing), facts))


def is_command_fact(name: str) -> bool:
    """A fact that holds a whole command line, quoted where it was built (``derived.pip``,
    ``derived.torch_install_command``): a fix's command takes it as it is."""
    last = name.rsplit(".", 1)[-1]
    return last == "pip" or last.endswith(("command", "_fix"))


def command_values(facts: Facts, bind: Callable[[str], str]) -> Callable[[str], str]:
    """``render_template``'s values inside a command: each fact shell-quoted, so that a pasted
    fix runs exactly the command it shows, whatever a path or a name holds ("a b", "$(…)")."""
    shown = fact_values(facts, bind)

    def value(name: str) -> str:
        text = shown(name)
        return text if is_command_fact(bind(name)) else shlex.quote(text)

    return value


def _commands(
    templates: tuple[str, ...], facts: Facts, bind: Callable[[str], str]
) -> tuple[tuple[str, ...], str | None]:
    """Rendered commands, leaving out any that need a fact we do not have, or that is null (a
    command never runs the word "none"), and saying why."""
    rendered: list[str] = []
    missing: str | None = None
    for template in templates:
        names = template_facts([template], bind)
        unknown = [name for name in names if not facts.has(name)]
        if unknown:
            missing = missing or facts.unknown_reason(unknown[0])
            continue
        empty = [name for name in names if facts.get(name) is None]
        if empty:
            missing = missing or f"{empty[0]} has no value here"
            continue
        rendered.append(render_template(template, command_values(facts, bind)))
    return tuple(rendered), missing


def _unknown(rule: Rule, facts: Facts, name: str, subject: str | None) -> Result:
    # the reason says what went wrong, in words; the fact's name is in the evidence (-v, JSON)
    reason = facts.unknown_reason(name)
    return _result(rule, Status.UNKNOWN, f"could not check: {reason}", subject, evidence={name: f"unknown: {reason}"})


def judge(
    rules: Iterable[Rule],
    facts: Facts,
    *,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    configured: tuple[Iterable[str], Iterable[str]] = ((), ()),
    judgement: Judgement | None = None,
    seconds: float = JUDGING_SECONDS,
) -> list[Result]:
    """Judge every env rule; ``select`` / ``ignore`` are the command line's, ``configured`` the
    configuration's (select, ignore).  A rule left out comes back as ``skipped``, saying by what,
    so the report is complete.  Rules still unjudged after ``seconds`` are errors, saying so."""
    deadline = time.monotonic() + seconds
    env = [rule for rule in rules if rule.kind == "env"]
    judgement = judgement or Judgement()
    off = [rule.id for rule in env if rule.severity_override(judgement.severity) == "off"]
    skipped = left_out(env, select, ignore, configured, off)
    judged: list[Judged] = []
    for rule in env:
        if rule.id in skipped:
            judged.append((_result(rule, Status.SKIPPED, skipped[rule.id]), ()))
            continue
        if time.monotonic() > deadline:  # each rule is bounded (RE2); together they are too
            judged.append((_result(rule, Status.ERROR, f"not judged: judging took more than {seconds:g} s"), ()))
            continue
        judged.extend(_judge_rule(rule, facts, judgement))
    return link_causes(judged)


#: A cause and its consequences are findings: a warning or a failure.
LINKED = (Status.WARN, Status.FAIL)


def link_causes(judged: list[Judged]) -> list[Result]:
    """Each failure that a finding of this run explains (its outcome's ``explains`` names the
    failing rule) gets ``because``: the rule at the root of the chain of causes.  A cause about
    one subject (a GPU) explains only results about that subject; a cause about the whole
    machine explains every subject's.  The first cause in judging order wins."""
    findings: dict[str, list[int]] = {}  # rule id → the positions of its findings
    for n, (result, _) in enumerate(judged):
        if result.status in LINKED:
            findings.setdefault(result.rule_id, []).append(n)
    direct: dict[int, int] = {}  # consequence's position → its cause's
    for at, (cause, explains) in enumerate(judged):
        if cause.status not in LINKED:
            continue
        for n in (n for rule_id in explains for n in findings.get(rule_id, ())):
            if n not in direct and cause.subject in (None, judged[n][0].subject):
                direct[n] = at
    results = [result for result, _ in judged]
    for n, first in direct.items():
        root, seen = first, {n}
        while root in direct and root not in seen:  # loops are refused when rules load; never follow one
            seen.add(root)
            root = direct[root]
        results[n] = results[n]._replace(because=results[root].rule_id)
    return results
