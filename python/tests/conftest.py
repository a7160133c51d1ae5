"""Fixtures shared by the Python tests: a context per test module, and a random
stream per test seeded by its name, so that a test reproduces alone or in the suite."""
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
