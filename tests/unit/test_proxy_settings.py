"""The four proxy settings: where each comes from (file < env < CLI) and the messages of a bad
value (one line naming the setting and the URL, the password never echoed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlq.errors import ConfigError
from crawlq.rules.proxies import parse_proxy
from crawlq.settings import Settings

SECRET = "s3tt1ngs-pw"


def _file(tmp_path: Path, text: str) -> Path:
    conf = tmp_path / "crawl.toml"
    conf.write_text(text)
    return conf


def test_each_proxy_setting_takes_file_then_env_then_cli(tmp_path: Path) -> None:
    conf = _file(
        tmp_path,
        'proxies = ["http://file:3128"]\nproxy_rotation = "request"\n'
        "proxy_trust_env = true\nproxy_bench_s = 5.0\n",
    )
    from_file = Settings.build(file=conf, env={})
    assert from_file.proxies == ("http://file:3128",)
    assert (from_file.proxy_rotation, from_file.proxy_trust_env) == ("request", True)
    assert from_file.proxy_bench_s == 5.0
    env = {
        "CRAWLQ_PROXIES": f"http://u:{SECRET}@env1:3128, socks5://env2:1080",
        "CRAWLQ_PROXY_ROTATION": "host",
        "CRAWLQ_PROXY_TRUST_ENV": "false",
        "CRAWLQ_PROXY_BENCH_S": "7.5",
    }
    from_env = Settings.build(file=conf, env=env)
    assert from_env.proxies == (f"http://u:{SECRET}@env1:3128", "socks5://env2:1080")
    assert (from_env.proxy_rotation, from_env.proxy_trust_env) == ("host", False)
    assert from_env.proxy_bench_s == 7.5
    cli = {
        "proxies": ("https://cli:8443",),
        "proxy_rotation": "request",
        "proxy_trust_env": True,
        "proxy_bench_s": 9.0,
    }
    from_cli = Settings.build(file=conf, env=env, cli=cli)
    assert from_cli.proxies == ("https://cli:8443",)
    assert (from_cli.proxy_rotation, from_cli.proxy_trust_env) == ("request", True)
    assert from_cli.proxy_bench_s == 9.0
    # not given on the command line (None, an empty repeatable option): the env still counts
    kept = Settings.build(file=conf, env=env, cli=dict.fromkeys(cli))
    assert kept.proxies == from_env.proxies and kept.proxy_bench_s == 7.5
    defaults = Settings.build(env={})
    assert (defaults.proxies, defaults.proxy_rotation) == ((), "host")
    assert (defaults.proxy_trust_env, defaults.proxy_bench_s) == (False, 30.0)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        (f"ftp://u:{SECRET}@p.test:21", "the scheme must be http, https or socks5"),
        (f"http://u:{SECRET}@:3128", "no host"),
        (f"http://u:{SECRET}@p.test:3128/path", "a proxy URL has no path or query"),
        (f"http://u:{SECRET}@p.test:3128?x=1", "a proxy URL has no path or query"),
        (f"http://u:{SECRET}@p.test:99999", "Port out of range"),
        (f"u:{SECRET}@p.test:3128", "the scheme must be http, https or socks5"),  # no scheme
    ],
)
@pytest.mark.parametrize("source", ["cli", "env", "file"])
def test_a_bad_proxy_url_is_one_line_naming_it_without_its_password(
    tmp_path: Path, url: str, why: str, source: str
) -> None:
    kwargs: dict[str, object] = {"env": {}}
    if source == "cli":
        kwargs["cli"] = {"proxies": ("http://fine:3128", url)}
    elif source == "env":
        kwargs["env"] = {"CRAWLQ_PROXIES": f"http://fine:3128,{url}"}
    else:
        kwargs["file"] = _file(tmp_path, f'proxies = ["http://fine:3128", "{url}"]\n')
    with pytest.raises(ConfigError) as caught:
        Settings.build(**kwargs)  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith("proxies") and why in message, message
    assert "\n" not in message and SECRET not in message
    shown = url.replace(SECRET, "***") if "@" in url else url
    assert shown.split("@")[-1].split("/")[0].split("?")[0] in message  # names the input
    with pytest.raises(ValueError) as raw:  # what the pool raises for an HTTP_PROXY too
        parse_proxy(url)
    assert why in str(raw.value) and SECRET not in str(raw.value)


@pytest.mark.parametrize(
    ("cli", "name"),
    [
        ({"proxy_rotation": "random"}, "proxy_rotation"),
        ({"proxy_bench_s": 0}, "proxy_bench_s"),
        ({"proxy_bench_s": -1.0}, "proxy_bench_s"),
        ({"proxy_trust_env": "perhaps"}, "proxy_trust_env"),
    ],
)
def test_bad_proxy_choices_name_their_setting(cli: dict[str, object], name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.build(env={}, cli=cli)
    assert str(caught.value).startswith(name) and "\n" not in str(caught.value)
