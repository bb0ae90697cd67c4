"""The committed fixtures are what scripts/make_fixtures.py builds, and are valid, runnable models."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import opconv
from opconv.validation import check_model
from tests.conftest import ROOT


def test_fixtures_are_up_to_date():
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "make_fixtures.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", ["cnn", "transformer", "lstm", "mlp_external"])
def test_fixture_is_valid(fixtures_dir, name):
    assert check_model(opconv.load(os.path.join(fixtures_dir, f"{name}.onnx"))) == []
