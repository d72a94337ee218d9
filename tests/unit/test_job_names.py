"""Job names: one rule (`crawlq.settings.JOB_NAME_RULE`) for every source, derived names pass."""

from __future__ import annotations

import pytest

from crawlq.engine.plan import default_job_name
from crawlq.errors import ConfigError
from crawlq.settings import JOB_NAME_RULE, Settings, check_job_name

BAD = ["", "a{b", "a}b", "a b", "café", "x" * 201, "-x", "a*b", "a\nb", "none "]
GOOD = ["docs", "test-0123456789ab", "a", "x" * 200, "Q.a_b:c-1", "127.0.0.1-8000-e2051fd8"]


@pytest.mark.parametrize("name", BAD)
def test_bad_names_are_a_config_error_naming_job(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_job_name(name)
    assert info.value.name == "job"
    assert JOB_NAME_RULE in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", GOOD)
def test_good_names_pass(name: str) -> None:
    assert check_job_name(name) == name
    assert Settings.build(env={}, cli={"job": name}).job == name


@pytest.mark.parametrize("source", ["cli", "env", "replace"])
def test_every_way_into_settings_is_checked(source: str) -> None:
    with pytest.raises(ConfigError, match=r"^job: "):
        if source == "cli":
            Settings.build(env={}, cli={"job": "a b"})
        elif source == "env":
            Settings.build(env={"CRAWLQ_JOB": "a{b"})
        else:
            import dataclasses

            dataclasses.replace(Settings(), job="café")


def test_empty_is_a_bad_name_and_none_is_a_name() -> None:
    with pytest.raises(ConfigError, match="got ''"):
        Settings.build(env={"CRAWLQ_JOB": ""})
    with pytest.raises(ConfigError, match="got ''"):
        Settings.build(env={}, cli={"job": ""})
    assert Settings.build(env={}, cli={"job": "none"}).job == "none"  # not "no job"
    assert Settings.build(env={}).job is None  # not given at all: derived from the seeds


def test_long_names_are_shown_cut() -> None:
    with pytest.raises(ConfigError) as info:
        check_job_name("y" * 5000)
    assert len(str(info.value)) < 300 and "(5000 characters)" in str(info.value)


@pytest.mark.parametrize(
    "seed",
    [
        "http://127.0.0.1:8000/index.html",
        "http://[::1]:8000/",
        "http://bücher.example/",
        "https://" + ".".join(["a" * 63] * 3) + "." + "b" * 61 + ":8443/",
        "http://-x.example/",
    ],
)
def test_derived_names_follow_the_rule(seed: str) -> None:
    name = default_job_name([seed])
    assert check_job_name(name) == name
    assert len(name) <= 200


def test_derived_names_of_ordinary_hosts_are_unchanged() -> None:
    assert default_job_name(["http://127.0.0.1:8000/index.html"]).startswith("127.0.0.1-8000-")
    long_host = "h" * 150 + ".example"  # under the cut: the name is as before the rule
    assert default_job_name([f"http://{long_host}/"]).startswith(long_host + "-")
