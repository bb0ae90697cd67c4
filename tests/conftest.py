"""Shared test setup: quiet OpenVINO telemetry; the fixtures folder."""

import os

os.environ.setdefault("CI", "true")  # `import openvino` otherwise waits on telemetry

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def fixtures_dir():
    return os.path.join(ROOT, "fixtures")
