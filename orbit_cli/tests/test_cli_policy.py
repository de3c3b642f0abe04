"""Policies (chapter 58): the chapter's diagnostics as golden files, byte
for byte; every rule; waivers and exemptions; errors in the policy file;
`--policy` on check, compile and deploy."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli

# The golden fixture of conftest.py: (name, actual text).
Golden = Callable[[str, str], None]
FIXTURES = Path(__file__).parent / "fixtures" / "policy"
FINTECH = "examples/policies/fintech.toml"


@pytest.fixture
def book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(FIXTURES, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def orbit(*args: str) -> Result:
    return CliRunner(env={"NO_COLOR": "1"}).invoke(cli, list(args))


TRANSCRIPTS = [
    ("policy_approval", ["--policy", FINTECH, "examples/approval.orbit"], 0),
    ("policy_checkout", ["--policy", FINTECH, "examples/checkout.orbit"], 1),
    ("policy_waivers", ["--policy", "policies/fintech.toml", "checkout.orbit"], 1),
    ("policy_payout", ["--policy", "approval-policy.toml", "payout.orbit"], 1),
    ("policy_payout2", ["--policy", "approval-policy.toml", "payout2.orbit"], 0),
]


@pytest.mark.parametrize(("name", "args", "status"), TRANSCRIPTS)
def test_the_chapter_transcripts(
    book: Path, golden: Golden, name: str, args: list[str], status: int
) -> None:
    result = orbit("check", *args)
    assert result.exit_code == status, result.output
    golden(name, result.stderr + result.stdout)


def test_exemptions_transcript(book: Path, golden: Golden, monkeypatch: pytest.MonkeyPatch) -> None:
    # The chapter's checkout.orbit keeps only one waiver here.
    shutil.copy(book / "exempt" / "checkout.orbit", book / "checkout.orbit")
    result = orbit("check", "--policy", "policies/exempt.toml", "checkout.orbit")
    assert result.exit_code == 0, result.output
    golden("policy_exemptions", result.stderr + result.stdout)


def test_the_byte_for_byte_probe(book: Path) -> None:
    result = orbit("check", "--policy", FINTECH, "examples/checkout.orbit")
    expected = (FIXTURES.parent.parent / "golden" / "policy_checkout.txt").read_text()
    assert result.stderr == expected


def test_json_diagnostics_have_the_compilers_shape(book: Path) -> None:
    result = orbit("check", "--format", "json", "--policy", FINTECH, "examples/checkout.orbit")
    assert result.exit_code == 1
    picked = [
        json.dumps(
            {
                "severity": d["severity"],
                "code": d["code"],
                "message": d["message"],
                "line": d["location"]["line"],
            },
            separators=(",", ":"),
        )
        for d in json.loads(result.stdout)["diagnostics"]
    ]
    assert picked == [
        '{"severity":"error","code":"P0101","message":"policy rule `payments-compensated`: '
        'step `charge` calls `payments.charge` but has no compensation","line":22}',
        '{"severity":"error","code":"P0105","message":"policy rule `large-charge-approval`: '
        "step `charge` calls `payments.charge` without depending on an approval (`await` of "
        '`review`, `approval`) when input.amount >= 10000","line":22}',
        '{"severity":"warning","code":"P0104","message":"policy rule `payment-timeout`: '
        'step `charge` calls `payments.charge` without a `timeout`","line":22}',
    ]


def test_strict_fails_on_policy_warnings(book: Path) -> None:
    result = orbit("check", "--strict", "--policy", FINTECH, "examples/approval.orbit")
    assert result.exit_code == 1


def test_compile_writes_nothing_on_a_policy_error(book: Path) -> None:
    result = orbit("compile", "--policy", FINTECH, "examples/checkout.orbit", "-o", "out")
    assert result.exit_code == 1
    assert "error: policy check failed: 2 error(s), 1 warning(s)" in result.stderr
    assert not (book / "out").exists()
    ok = orbit("compile", "--policy", FINTECH, "examples/approval.orbit", "-o", "out")
    assert ok.exit_code == 0, ok.output
    assert (book / "out" / "approval.orbit.json").exists()


def test_deploy_refuses_before_contacting_the_server(book: Path) -> None:
    # No server listens on this port: a refusal must come before any request.
    env = ["--server", "http://127.0.0.1:9"]
    result = orbit("deploy", *env, "--policy", FINTECH, "examples/checkout.orbit")
    assert result.exit_code == 1
    assert result.stderr.endswith("error: policy check failed: 2 error(s), 1 warning(s)\n")
    compiled = orbit("compile", "examples/approval.orbit", "-o", "out")
    assert compiled.exit_code == 0
    ir = orbit("deploy", *env, "--policy", FINTECH, "out/approval.orbit.json")
    assert ir.exit_code == 1
    assert "--policy needs .orbit sources" in ir.stderr


def test_policies_do_not_run_on_files_with_compile_errors(book: Path) -> None:
    (book / "broken.orbit").write_text(
        'workflow Broken {\n    version "1.0.0"\n    step a { sleep }\n}\n'
    )
    result = orbit("check", "--policy", FINTECH, "broken.orbit")
    assert result.exit_code == 1
    assert "P01" not in result.stderr
    assert "error: compilation failed" in result.stderr


# ---------------------------------------------------------------- the policy file


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[[rule]\n", "Expected ']]' at the end of an array declaration (at line 1, column 7)"),
        ('[[rule]]\ntype = "nope"\n', "rule 1: unknown type `nope`; known types: "),
        (
            '[[rule]]\nid = "h"\ntype = "require_handler"\ntasks = ["a"]\n',
            "rule h: `tasks` does not apply to `require_handler` (it takes: handlers)",
        ),
        (
            '[[rule]]\nid = "r"\ntype = "require_retry"\n',
            "rule r: `require_retry` needs `tasks = [...]`",
        ),
        (
            '[[rule]]\ntype = "forbid_tasks"\ntasks = ["a"]\nseverity = "fatal"\n',
            "`severity` must be",
        ),
        ('[[rule]]\ntype = "require_timeout"\nmax = "soon"\n', "`max` must be a duration"),
        ('[[rule]]\ntype = "max_attempts"\nmax = 0\n', "`max` must be a positive integer"),
        (
            '[[rule]]\ntype = "require_retry"\ntasks = ["*"]\nmin_attempts = 5\nmax_attempts = 2\n',
            "`min_attempts` is above `max_attempts`",
        ),
        ('[[rule]]\ntype = "require_handler"\nhandlers = ["crash"]\n', "unknown handler `crash`"),
        ('[[rule]]\ntype = "require_limits"\nkeys = ["speed"]\n', "unknown limit `speed`"),
        (
            '[[rule]]\ntype = "require_approval"\ntasks = ["*"]\nsignals = ["r"]\nwhen = "x > 1"\n',
            "`when` must have the form",
        ),
        (
            '[[rule]]\ntype = "forbid_tasks"\ntasks = ["a"]\n[[rule]]\ntype = "forbid_tasks"\ntasks = ["b"]\n',
            "rule 2: duplicate id `forbid_tasks`",
        ),
        (
            '[[rule]]\ntype = "forbid_tasks"\ntasks = ["a"]\n[[exemption]]\nrule = "x"\nreason = "y"\n',
            "exemption 1: unknown rule `x`",
        ),
        (
            '[[rule]]\ntype = "forbid_tasks"\ntasks = ["a"]\n[[exemption]]\nrule = "forbid_tasks"\n',
            "exemption 1 (`forbid_tasks`): reason is required",
        ),
        ('[policy]\nnmae = "x"\n', "[policy] unknown key `nmae`"),
        ("[[rule]]\ntype = [1]\n", "rule 1: unknown type `[1]`"),
        ("exemption = 1\n", "`exemption` must be an array of tables"),
        ("rule = 1\n", "`rule` must be an array of tables"),
        ("policy = 1\n", "`policy` must be a table"),
        ('[[rule]]\ntype = "forbid_tasks"\ntasks = "a"\n', "`tasks` must be a list of strings"),
        ('[[rule]]\ntype = "max_fan_out"\nmax = true\n', "`max` must be a positive integer"),
        (
            '[[rule]]\ntype = "forbid_tasks"\ntaks = ["a"]\n',
            "rule forbid_tasks: unknown key `taks`",
        ),
    ],
)
def test_a_bad_policy_file_is_a_located_error_before_compiling(
    book: Path, content: str, message: str
) -> None:
    (book / "bad.toml").write_text(content)
    result = orbit("check", "--policy", "bad.toml", "examples/approval.orbit")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: policy bad.toml: ")
    assert message in result.stderr
    assert result.stdout == ""


def test_a_missing_policy_file_is_an_error(book: Path) -> None:
    result = orbit("check", "--policy", "nowhere.toml", "examples/approval.orbit")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: policy nowhere.toml: cannot read the file")


# ---------------------------------------------------------------- every rule

WORKFLOW = """
task "payments.charge" {
    version "1.0.0"
    input { amount: Float }
    output { id: String }
}
task "legacy.fax" {
    version "1.0.0"
    input { to: String }
    output { ok: Bool }
}

workflow W {
    version "1.0.0"
    input { amount: Float, items: List<String> }
    signal review { approved: Bool }

    step wait { await review }

    step charge {
        worker "payments.charge"
        with { amount: input.amount }
        retry { attempts: 5 }
        timeout 5m
    }

    step each {
        for item in input.items
        worker "legacy.fax"
        with { to: item }
    }
}
"""


# Chapter 69's table of P01xx messages, one case per variant, word for word.
RULES = """
task "payments.charge" {
    version "1.0.0"
    input { amount: Float }
    output { id: String }
}
task "legacy.fax" {
    version "1.0.0"
    input { to: String }
    output { ok: Bool }
}

workflow W {
    version "1.0.0"
    input { amount: Float, items: List<String> }
    signal review { approved: Bool }
    signal approval { approved: Bool }

    step wait { await review }

    step later {
        await approval
        timeout 30d
    }

    step charge {
        worker "payments.charge"
        with { amount: input.amount }
        retry { attempts: 5 }
        timeout 10m
        compensate {
            worker "legacy.fax"
            with { to: "billing" }
        }
    }

    step fax {
        worker "legacy.fax"
        with { to: "ops" }
    }

    step each {
        for item in input.items
        worker "legacy.fax"
        with { to: item }
    }
}

workflow V {
    version "1.0.0"
    input { items: List<String> }

    limits { max_fan_out: 1000 }

    step each {
        for item in input.items
        max_parallel 4
        worker "legacy.fax"
        with { to: item }
    }
}
"""

EVERY_MESSAGE = [
    (
        'type = "require_compensation"\ntasks = ["legacy.*"]\nworkflows = ["W"]',
        "P0101",
        [
            "step `fax` calls `legacy.fax` but has no compensation",
            "step `each` calls `legacy.fax` but has no compensation",
        ],
    ),
    (
        'type = "require_compensation"\ntasks = ["payments.*"]\n'
        'compensate_with = ["payments.refund", "payments.void"]',
        "P0101",
        [
            "step `charge` compensates `payments.charge` with `legacy.fax`, which is not one "
            "of `payments.refund`, `payments.void`"
        ],
    ),
    (
        'type = "require_retry"\ntasks = ["legacy.*"]\nmin_attempts = 3\nworkflows = ["W"]',
        "P0102",
        [
            "step `fax` calls `legacy.fax` with 1 attempt(s); at least 3 required",
            "step `each` calls `legacy.fax` with 1 attempt(s); at least 3 required",
        ],
    ),
    (
        'type = "require_retry"\ntasks = ["payments.*"]\nmax_attempts = 3',
        "P0102",
        ["step `charge` calls `payments.charge` with up to 5 attempts; at most 3 allowed"],
    ),
    (
        'type = "max_attempts"\nmax = 3',
        "P0103",
        ["step `charge` calls `payments.charge` with up to 5 attempts; at most 3 allowed"],
    ),
    (
        'type = "require_timeout"\ntasks = ["payments.*"]\nmax = "1m"',
        "P0104",
        ["step `charge` has `timeout 10m`; at most 1m allowed"],
    ),
    (
        'type = "require_timeout"\ntasks = ["legacy.*"]\nworkflows = ["W"]',
        "P0104",
        [
            "step `fax` calls `legacy.fax` without a `timeout`",
            "step `each` calls `legacy.fax` without a `timeout`",
        ],
    ),
    (
        'type = "require_timeout"\ntasks = ["payments.*"]\nqueue_timeout = true',
        "P0104",
        ["step `charge` calls `payments.charge` without a `queue_timeout`"],
    ),
    (
        'type = "require_approval"\ntasks = ["payments.*"]\nsignals = ["review", "approval"]\n'
        'when = "input.amount >= 10000"',
        "P0105",
        [
            "step `charge` calls `payments.charge` without depending on an approval "
            "(`await` of `review`, `approval`) when input.amount >= 10000"
        ],
    ),
    (
        'type = "require_approval"\ntasks = ["payments.*"]\nsignals = ["review"]\n'
        'when = "input.total >= 10000"',
        "P0105",
        [
            "step `charge` calls `payments.charge`, but the workflow input has no numeric "
            "field `total` to evaluate `input.total >= 10000`"
        ],
    ),
    (
        'type = "require_handler"\nhandlers = ["failure", "cancel", "timeout"]\nworkflows = ["W"]',
        "P0106",
        ["workflow `W` has no `on failure`, `on cancel`, `on timeout` handler"],
    ),
    (
        'type = "require_handler"\nworkflows = ["W"]',
        "P0106",
        ["workflow `W` has no `on failure` handler"],
    ),
    (
        'type = "forbid_tasks"\ntasks = ["legacy.*"]\nworkflows = ["W"]',
        "P0107",
        [
            "the compensation of step `charge` calls `legacy.fax`, a forbidden task",
            "step `fax` calls `legacy.fax`, a forbidden task",
            "step `each` calls `legacy.fax`, a forbidden task",
        ],
    ),
    (
        'type = "allow_tasks"\ntasks = ["payments.*"]\nworkflows = ["W"]',
        "P0108",
        [
            "the compensation of step `charge` calls `legacy.fax`, a task outside the allowed list",
            "step `fax` calls `legacy.fax`, a task outside the allowed list",
            "step `each` calls `legacy.fax`, a task outside the allowed list",
        ],
    ),
    (
        'type = "max_fan_out"\nmax = 500\nrequire_max_parallel = true',
        "P0109",
        [
            "workflow `W` has `for` steps (`each`) but no `limits { max_fan_out: ... }`",
            "`for` step `each` has no `max_parallel`",
            "workflow `V` allows `max_fan_out: 1000`; at most 500 allowed",
        ],
    ),
    (
        'type = "require_limits"\nkeys = ["max_history_events", "max_payload_bytes"]\n'
        'workflows = ["W"]',
        "P0110",
        [
            "workflow `W` does not set `max_history_events` in `limits`",
            "workflow `W` does not set `max_payload_bytes` in `limits`",
        ],
    ),
    (
        'type = "require_signal_timeout"\nmax = "7d"',
        "P0111",
        [
            "step `wait` waits for signal `review` without a step `timeout`",
            "step `later` waits up to 30d for `approval`; at most 7d allowed",
        ],
    ),
]


@pytest.mark.parametrize(
    ("rule", "code", "messages"),
    EVERY_MESSAGE,
    ids=[f"{code}-{i}" for i, (_, code, _) in enumerate(EVERY_MESSAGE)],
)
def test_every_rule_prints_chapter_69s_message(
    book: Path, rule: str, code: str, messages: list[str]
) -> None:
    (book / "w.orbit").write_text(RULES)
    (book / "p.toml").write_text(f'[[rule]]\nid = "r"\n{rule}\n')
    result = orbit("check", "--format", "json", "--policy", "p.toml", "w.orbit")
    assert result.exit_code == 1, result.output
    found = [
        (d["code"], d["message"])
        for d in json.loads(result.stdout)["diagnostics"]
        if d["code"].startswith("P")
    ]
    assert sorted(found) == sorted((code, f"policy rule `r`: {m}") for m in messages)


def test_every_rule_renders_in_full(book: Path, golden: Golden) -> None:
    # Every variant above at once, with its location, note and help.
    (book / "w.orbit").write_text(RULES)
    rules = "".join(
        f'[[rule]]\nid = "r{i}"\n{rule}\n\n' for i, (rule, _, _) in enumerate(EVERY_MESSAGE)
    )
    (book / "p.toml").write_text(rules)
    result = orbit("check", "--policy", "p.toml", "w.orbit")
    assert result.exit_code == 1, result.output
    golden("policy_every_rule", result.stderr + result.stdout)


def test_a_waiver_above_the_workflow_waives_every_step(book: Path) -> None:
    (book / "w.orbit").write_text(
        WORKFLOW.replace("workflow W {", "// policy-allow: r the fax line is audited\nworkflow W {")
    )
    (book / "p.toml").write_text(
        '[[rule]]\nid = "r"\ntype = "forbid_tasks"\ntasks = ["legacy.*"]\n'
    )
    result = orbit("check", "--policy", "p.toml", "w.orbit")
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok W@1.0.0 (3 steps)\n"


def test_a_waiver_for_an_unknown_rule_lists_the_ids(book: Path) -> None:
    (book / "w.orbit").write_text(
        WORKFLOW.replace("    step wait", "    // policy-allow: nope why\n    step wait")
    )
    (book / "p.toml").write_text('[[rule]]\nid = "r"\ntype = "forbid_tasks"\ntasks = ["x.*"]\n')
    result = orbit("check", "--policy", "p.toml", "w.orbit")
    assert result.exit_code == 1
    assert "error[P0001]: waiver names unknown policy rule `nope`" in result.stderr
    assert "= note: the policies define: `r`" in result.stderr


def test_rules_narrowed_to_other_workflows_do_not_apply(book: Path) -> None:
    (book / "w.orbit").write_text(WORKFLOW)
    (book / "p.toml").write_text(
        '[[rule]]\ntype = "forbid_tasks"\ntasks = ["legacy.*"]\nworkflows = ["Other*"]\n'
    )
    assert orbit("check", "--policy", "p.toml", "w.orbit").exit_code == 0


def test_glob_patterns() -> None:
    from orbit_lang.policy import glob_match

    assert glob_match("payments.*", "payments.eu.charge")
    assert glob_match("*.charge", "payments.charge")
    assert glob_match("pay?ents.charge", "payments.charge")
    assert not glob_match("Payments.*", "payments.charge")
    assert not glob_match("payments.[ab]", "payments.a")
