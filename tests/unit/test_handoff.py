"""`crawlq.settings.handoff.own_env`: a command's workers read back its own settings."""

from __future__ import annotations

from crawlq.settings import Settings
from crawlq.settings.handoff import own_env


def test_a_child_reads_back_the_commands_own_per_process_settings() -> None:
    given = Settings.build(
        cli={
            "spider": "shop.py:Shop",
            "item_pipelines": ("pipes.py:Clean", "pipes.py:Price"),
            "downloader_middlewares": ("mw.py:Tag",),
            "item_type": "shop.py:Product",
            "proxies": ("http://user:pw@127.0.0.1:3128", "socks5://127.0.0.1:1080"),
            "proxy_rotation": "request",
            "proxy_trust_env": True,
        }
    )
    env = own_env(given)
    child = Settings.build(env=env)
    for name in (
        "spider",
        "item_pipelines",
        "downloader_middlewares",
        "item_type",
        "proxies",
        "proxy_rotation",
        "proxy_trust_env",
    ):
        assert getattr(child, name) == getattr(given, name), name


def test_defaults_hand_nothing() -> None:
    assert own_env(Settings.build()) == {}
