"""Fixtures shared by the Python tests: a context per test module, a random
stream per test seeded by its name, so that a test reproduces alone or in the
suite, and PyTorch for the tests that compare with it."""
import os

import numpy as np
import pytest

import clbound

SEED = 20240611


@pytest.fixture(scope="module")
def ctx():
    with clbound.Context() as c:
        yield c


@pytest.fixture
def rng(request):
    return np.random.default_rng([SEED, sum(map(ord, request.node.name))])


def torch_wanted():
    """Whether this run must have PyTorch, read as tests/python/pip-install.sh
    reads it: CLBOUND_TEST_TORCH as a CLBOUND_* boolean, defaulting to on where
    CI is set (not off/0/false/no, as the C tests read it)."""
    offs, ons = ("off", "0", "false", "no"), ("on", "1", "true", "yes")
    default = os.environ.get("CI", "").lower() not in offs + ("",)
    flag = os.environ.get("CLBOUND_TEST_TORCH", "").lower()
    return flag in ons or (flag not in offs and default)


@pytest.fixture(scope="session")
def torch():
    """The torch module. Without PyTorch the test skips, saying how to run it,
    unless this run asked for PyTorch (then the test fails: CI must not skip it)."""
    try:
        import torch as module
    except ImportError as e:
        if torch_wanted():
            pytest.fail(f"CLBOUND_TEST_TORCH (or CI) asks for the PyTorch tests, but torch does not "
                        f"import: {e}")
        pytest.skip("PyTorch is not installed here; `CLBOUND_TEST_TORCH=1 make test` installs it into the "
                    "test venv (about 5 GB from PyPI) and runs these tests")
    return module
