"""The abandon signal: an operation learns that its result can never be recorded (its host is gone)."""

from __future__ import annotations

import pytest

from tfbridge import Context
from tfbridge.cancel import Cancelled, CancelToken
from tfbridge.logs import Logger


def test_abandoning_cancels_waits_and_says_why() -> None:
    token = CancelToken()
    ctx = Context(token, Logger("test"))
    assert not ctx.abandoned and not token.cancelled
    token.abandon()  # what tfbridge.serving.handshake does (for every token, abandon_all) once the host is gone
    assert ctx.abandoned and token.cancelled
    with pytest.raises(Cancelled):
        ctx.sleep(5.0)


def test_ctrl_c_cancels_without_abandoning() -> None:
    token = CancelToken()
    token.cancel()
    assert token.cancelled and not Context(token, Logger("test")).abandoned
