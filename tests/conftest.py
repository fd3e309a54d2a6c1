"""Shared fixtures: the shipped configs, loaded once."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from nvdla_sim import load_config

settings.register_profile("default", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")

CONFIG_NAMES = ("nv_small", "nv_large", "nv_full")


@pytest.fixture(scope="session", params=CONFIG_NAMES)
def hw(request):
    return load_config(request.param)


@pytest.fixture(scope="session")
def nv_full():
    return load_config("nv_full")


@pytest.fixture(scope="session")
def nv_small():
    return load_config("nv_small")
