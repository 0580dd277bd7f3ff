"""What never reaches a report or a log: credentials in URLs, secret variables and options."""

from __future__ import annotations

import pytest

from cuda_doctor.base.secrets import is_secret_name, redact, redact_argv, redact_value


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("tcp://user:password@10.0.0.5:2376", "tcp://***@10.0.0.5:2376"),
        ("https://ghp_abc123@github.com/org/repo.git", "https://***@github.com/org/repo.git"),
        ("see https://a:b@x.y/z and ssh://git@host", "see https://***@x.y/z and ssh://***@host"),
        ("unix:///var/run/docker.sock", "unix:///var/run/docker.sock"),
        ("name@example.com wrote", "name@example.com wrote"),  # not a URL
    ],
)
def test_url_credentials_are_hidden(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_secret_options_lose_their_values() -> None:
    argv = ["python", "train.py", "--api-key=abc", "--hf_token", "hf_x", "--lr", "0.1", "--url=https://u:p@h/"]
    assert redact_argv(argv) == [
        "python",
        "train.py",
        "--api-key=***",
        "--hf_token",
        "***",
        "--lr",
        "0.1",
        "--url=https://***@h/",
    ]


@pytest.mark.parametrize(
    ("name", "secret"),
    [("GITHUB_TOKEN", True), ("ssh_private_key", True), ("DB_Password", True), ("NCCL_SOCKET_IFNAME", False)],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_values_at_any_depth() -> None:
    value = {"DOCKER_HOST": "tcp://u:p@h", "WANDB_API_KEY": "abc", "list": ["https://t@h/x"]}
    assert redact_value(value) == {"DOCKER_HOST": "tcp://***@h", "WANDB_API_KEY": "***", "list": ["https://***@h/x"]}
