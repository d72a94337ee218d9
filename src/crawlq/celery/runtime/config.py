"""Celery configuration for crawlq's tasks, and crawlq priority on each broker.

**Priority.** In crawlq a higher priority runs sooner, and that is what ``priority=`` means on
crawlq's tasks on every broker (``scrape.apply_async(args=[url], priority=9)`` runs before
priority 0). A task's priority is clamped to 0..9 (negative, such as the ``-depth`` of links a
spider follows without choosing, gives 0; within one priority tasks are first in, first out,
which is breadth-first). What goes on the wire differs:

* Redis transport: 0 is the *highest* priority and only 4 steps exist by default, so the
  transport gets ``priority_steps = [0..9]`` (one list per level, consumed in that order) and
  each task is sent with ``9 - priority``;
* RabbitMQ (AMQP): higher is sooner when the queue is declared with ``x-max-priority``; the
  queue is declared with ``x-max-priority = 10`` and tasks are sent with ``priority`` as is.

**Delivery.** Messages are JSON (pickle is refused); tasks are acknowledged after they
finish (``acks_late``) and rejected back to the queue when their worker process dies, with a
broker visibility timeout that fits a task's fetches and its longest countdown. Pages, items
and dead letters go to crawlq's store; a ``scrape`` task's result is a small dict of its
outcome (`crawlq.celery.runtime.wire`) in the job's Redis for ``celery_result_expires_s``
(`result_config`); every other task ignores its result.
"""

from __future__ import annotations

from typing import Any

from kombu.entity import Exchange, Queue

from crawlq.errors import ConfigError
from crawlq.settings import Settings
from crawlq.settings.checks import REDIS_TCP_SCHEMES, is_redis_broker, is_redis_url

__all__ = [
    "MAX_PRIORITY",
    "broker_priority",
    "celery_config",
    "clamp_priority",
    "dedup_redis_url",
    "patch_kombu_redis_restore",
    "result_config",
    "task_queue",
    "visibility_timeout_s",
]

MAX_PRIORITY = 9
"""Highest crawlq priority a Celery task can carry (0..9)."""


def clamp_priority(priority: int | None) -> int:
    """A crawlq priority as a task priority: 0..9; None, NaN and non-numbers as 0."""
    if isinstance(priority, bool) or not isinstance(priority, int | float):
        return 0  # a task message is untrusted: garbage is the lowest priority, not an error
    if priority != priority:  # NaN
        return 0
    return int(max(0, min(MAX_PRIORITY, priority)))


def broker_priority(priority: int | None, broker_url: str | None) -> int:
    """The message priority to send for crawlq ``priority`` on the broker at ``broker_url``.

    Redis serves 0 first, so the scale is reversed there; AMQP serves higher first.
    """
    band = clamp_priority(priority)
    return MAX_PRIORITY - band if is_redis_broker(broker_url) else band


def dedup_redis_url(settings: Settings) -> str:
    """The Redis that holds the job's dedup and politeness state.

    ``settings.frontier`` when given, else the broker itself when it is Redis.

    Raises:
        ConfigError: Neither names a Redis server (a RabbitMQ broker needs ``frontier``).
    """
    url = settings.frontier or (
        settings.broker_url if is_redis_broker(settings.broker_url) else None
    )
    if not url or not is_redis_url(url):
        raise ConfigError(
            "frontier",
            "the Celery engine keeps dedup and politeness in Redis: give --frontier "
            "redis://host:port/db (CRAWLQ_FRONTIER), or use a Redis broker",
        )
    return url


def visibility_timeout_s(settings: Settings) -> float:
    """Seconds an unacknowledged task stays invisible on a Redis broker before redelivery.

    It must exceed a task's run time (fetches: ``effective_visibility_timeout_s``, 4 x
    ``timeout_s`` by default) plus its longest countdown (a retry's backoff, capped at
    ``retry_max_delay_s``), or a slow task would be delivered twice. ``visibility_timeout_s``,
    when set, is used as is: lower it for faster recovery after a worker is killed.
    """
    fetch_s = settings.effective_visibility_timeout_s
    return settings.visibility_timeout_s or fetch_s + settings.retry_max_delay_s


def task_queue(settings: Settings) -> Queue:
    """The queue of crawlq's tasks; on AMQP declared with ``x-max-priority = 10``."""
    name = settings.celery_queue
    arguments = None if is_redis_broker(settings.broker_url) else {"x-max-priority": 10}
    exchange = Exchange(name, type="direct")  # type: ignore[no-untyped-call]  # kombu: untyped
    return Queue(  # type: ignore[no-untyped-call]
        name, exchange, routing_key=name, queue_arguments=arguments
    )


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings for an app that runs crawlq's tasks (see the module docstring).

    Args:
        settings: crawlq settings; ``broker_url``, ``celery_queue``, ``timeout_s``,
            ``visibility_timeout_s`` and ``retry_max_delay_s`` are used.

    Returns:
        A mapping for ``app.conf.update``.
    """
    vt = visibility_timeout_s(settings)
    transport: dict[str, Any] = {"visibility_timeout": vt}
    if is_redis_broker(settings.broker_url):
        transport |= {
            "priority_steps": list(range(MAX_PRIORITY + 1)),
            "sep": ":",
            "queue_order_strategy": "priority",
            # restore tasks of killed workers about a visibility timeout after their delivery
            "unacked_restore_interval": max(1.0, min(10.0, vt / 4)),
            "unacked_restore_throttle": 1,
        }
    queue = task_queue(settings)
    return {
        **result_config(settings),
        "broker_url": settings.broker_url,
        "broker_transport_options": transport,
        "broker_connection_retry_on_startup": True,
        "task_serializer": "json",
        "accept_content": ["json"],
        "result_serializer": "json",
        "result_accept_content": ["json"],
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # False: on a lost broker connection running tasks finish (their repeat is absorbed)
        # instead of being cancelled, which on a Redis broker restoring them through the
        # closed connection kills the worker (celery/celery#9250)
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        # one task (up to celery_batch URLs) reserved per pool slot: a deeper prefetch would
        # hold higher-priority work back behind tasks already reserved
        "worker_prefetch_multiplier": 1,
        "task_default_queue": queue.name,
        "task_default_exchange": queue.name,
        "task_default_routing_key": queue.name,
        "task_default_priority": broker_priority(0, settings.broker_url),
        "task_queues": (queue,),
    }


def result_config(settings: Settings) -> dict[str, Any]:
    """Where ``scrape`` results go: the job's Redis, for ``celery_result_expires_s`` seconds.

    The Redis that holds the job's state (`dedup_redis_url`) is the result backend: nothing
    new to run, and results expire (``result_expires``; Celery's Redis backend sets a TTL on
    each). ``celery_result_expires_s = 0`` turns results off (no backend); so does a broker
    with no Redis for the state, whose workers refuse every task anyway.
    """
    expires = settings.celery_result_expires_s
    if expires <= 0:
        return {}
    try:
        url = dedup_redis_url(settings)
    except ConfigError:
        return {}
    if not url.startswith(REDIS_TCP_SCHEMES):
        return {}  # a unix:// socket: Celery's backend spells it otherwise; no results
    return {"result_backend": url, "result_expires": expires}


def patch_kombu_redis_restore() -> None:
    """Let a kombu Redis channel restore its unacked messages after its connection is closed.

    When a Redis broker restarts, Celery closes the broken connection (which clears the
    transport's ``client``) and then the channel, whose close restores its unacknowledged
    messages through a new connection pool built from that ``client``: ``AttributeError:
    'NoneType' object has no attribute 'hostname'``, an "Unrecoverable error" that ends the
    worker (celery/celery#9250). This remembers each channel's connection parameters when
    they are first built and uses them then; the restore then fails, if Redis is still down,
    with a connection error that the worker rides out (the messages come back after the
    visibility timeout, and ``crawl --engine celery`` sends their URLs again sooner).
    Idempotent; a no-op without the Redis transport.
    """
    try:
        from kombu.transport import redis as kombu_redis
    except ImportError:  # pragma: no cover - the redis extra is not installed
        return
    channel: Any = kombu_redis.Channel
    original: Any = channel._connparams
    if getattr(original, "crawlq_patched", False):
        return

    def connparams(self: Any, asynchronous: bool = False) -> Any:
        cache = self.__dict__.setdefault("_crawlq_connparams", {})
        if self.connection.client is None and asynchronous in cache:
            return dict(cache[asynchronous])
        params = original(self, asynchronous=asynchronous)
        cache[asynchronous] = dict(params)
        return params

    connparams.crawlq_patched = True  # type: ignore[attr-defined]
    channel._connparams = connparams
