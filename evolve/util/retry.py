"""The one retry policy for an LM call (the litellm reflector and the litellm policy backend).

litellm's own ``num_retries`` is not used (both callers pass 0): measured against a local
OpenAI-compatible server, ``num_retries=N`` sent 2N+1 requests on a 5xx, a 429 or a timeout (the
OpenAI SDK's retries and litellm's wrapper retries stack), and retried a 400, which cannot
succeed. Here ``retries=N`` means at most N+1 requests, only transient failures are retried, and
the wait doubles from ``backoff_s``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# HTTP statuses worth asking again: request timeout, conflict, rate limit, and server-side errors.
TRANSIENT_STATUS = frozenset({408, 409, 429})
TRANSIENT_NAMES = frozenset({"Timeout", "APITimeoutError", "APIConnectionError", "ServiceUnavailableError"})


def is_transient(error: BaseException) -> bool:
    """A timeout, a lost connection, a rate limit or a 5xx; not a bad request, key or model name.

    Judged by the exception's ``status_code`` (litellm and the OpenAI SDK set one) or its class
    name, so this module needs no provider library."""
    if isinstance(error, TimeoutError | ConnectionError):
        return True
    if any(t.__name__ in TRANSIENT_NAMES for t in type(error).__mro__):
        return True
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and (status in TRANSIENT_STATUS or status >= 500)


def with_retries(call: Callable[[], T], retries: int, backoff_s: float,
                 sleep: Callable[[float], None] = time.sleep,
                 transient: Callable[[BaseException], bool] = is_transient) -> T:
    """``call()``, asked again up to ``retries`` times after a transient failure (waits
    ``backoff_s``, then doubled each time); the last or a non-transient error is raised as is."""
    for attempt in range(retries + 1):
        if attempt:
            sleep(backoff_s * 2 ** (attempt - 1))
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - judged just below, re-raised when not retried
            if attempt == retries or not transient(e):
                raise
    raise AssertionError("unreachable: the loop returns or raises")
