"""A process forked after clbound was used: Context() raises ClboundError
(ERR_UNSUPPORTED, naming fork and spawn) instead of hanging, and inherited
objects are collected without touching the driver (python/README.md)."""
import os
import time

import numpy as np

import clbound


def test_forked_child_gets_an_error(ctx):
    t = ctx.tensor(np.float32, (4,))
    ctx.fill(t, 1.0)
    pid = os.fork()
    if pid == 0:  # the child: its verdict is its exit status
        code = 3
        try:
            clbound.Context()
        except clbound.ClboundError as e:
            code = 0 if "forked child" in str(e) and "spawn" in str(e) else 4
        try:
            ctx.fill(t, 2.0)
            code = code or 5
        except clbound.ClboundError:
            pass
        os._exit(code)
    for _ in range(3000):  # 60 s
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
            break
        time.sleep(0.02)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("the forked child hung")
    assert t.numpy().tolist() == [1.0] * 4
